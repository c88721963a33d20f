# Sourced by the Scripts: installs the Debian packages Cirrus builds with, and those named as
# arguments (`ensure_packages postgresql` where the tests run: the PostgreSQL engine's tests
# start a server of their own from its binaries, Tests/CirrusTestSupport/TemporaryPostgres.swift),
# if any is missing. Needs root or sudo the first time only.
CIRRUS_DEBIAN_PACKAGES=(libssl-dev openssl libprotobuf-c-dev protobuf-c-compiler libsqlite3-dev libmimalloc-dev pkg-config python3)

ensure_packages() {
    local missing=()
    local package
    for package in "${CIRRUS_DEBIAN_PACKAGES[@]}" "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "installing Debian packages: ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2
}
