#!/usr/bin/env bash
# Scans a running cirrusd with sslyze and fails unless it meets Mozilla's
# "modern" TLS profile (TLS 1.3 only; X25519, P-256, P-384; an ECDSA
# certificate on P-256 or P-384 living at most 90 days).
#
#   Scripts/tls-scan.sh                  # the default configuration (CI)
#   Scripts/tls-scan.sh --allow-tls12    # extra cirrusd flags to scan another configuration
#
# cirrusd runs with its default TLS configuration on a free loopback port in a
# temporary data directory. The one thing the scan supplies is the server
# certificate: the committed development certificate lives ten years so the
# tests never expire, and the profile allows 90 days, so a fresh 90-day
# ECDSA P-256 certificate for localhost is signed with the development CA for
# each scan. sslyze (pinned, from PyPI) goes into a virtualenv under /tmp
# (reused between runs; CIRRUS_SSLYZE_VENV moves it). Because cirrusd refuses
# clients that offer no ALPN and sslyze cannot offer it,
# Scripts/lib/sslyze_alpn.py makes each of sslyze's handshakes offer cirrus/1.
set -euo pipefail
cd "$(dirname "$0")/.."

SSLYZE_VERSION=6.3.1
NASSL_VERSION=5.4.0
PYELFTOOLS_VERSION=0.33
VENV="${CIRRUS_SSLYZE_VENV:-/tmp/cirrus-sslyze-venv}"

# Tools: python3 with venv and openssl, from Debian when missing.
source Scripts/lib/ensure-packages.sh
CIRRUS_DEBIAN_PACKAGES+=(python3-venv)
ensure_packages

if ! "$VENV/bin/python" -c "import sslyze, nassl, elftools, sys; sys.exit(sslyze.__version__ != '$SSLYZE_VERSION')" 2>/dev/null; then
    echo "== installing sslyze $SSLYZE_VERSION into $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check \
        "sslyze==$SSLYZE_VERSION" "nassl==$NASSL_VERSION" "pyelftools==$PYELFTOOLS_VERSION"
fi

echo "== building cirrusd"
swift build --product cirrusd > /dev/null
CIRRUSD="$(swift build --show-bin-path)/cirrusd"

WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2> /dev/null; then
        kill "$SERVER_PID"
        wait "$SERVER_PID" 2> /dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

echo "== a 90-day server certificate from the development CA"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/server-key.pem" 2> /dev/null
openssl req -new -sha256 -key "$WORK/server-key.pem" -subj "/O=Cirrus TLS scan/CN=localhost" -out "$WORK/server.csr"
cat > "$WORK/server.ext" <<'EXT'
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1
authorityKeyIdentifier=keyid
EXT
openssl x509 -req -sha256 -days 90 -in "$WORK/server.csr" -CA Certs/ca.pem -CAkey Certs/ca-key.pem \
    -set_serial "0x$(openssl rand -hex 16)" -extfile "$WORK/server.ext" -out "$WORK/server.pem" 2> /dev/null

echo "== starting cirrusd"
"$CIRRUSD" --port 0 --data-dir "$WORK/data" --cert "$WORK/server.pem" --key "$WORK/server-key.pem" "$@" \
    > "$WORK/cirrusd.out" 2> "$WORK/cirrusd.log" &
SERVER_PID=$!
PORT=""
for _ in $(seq 1 300); do
    if [[ -s "$WORK/cirrusd.out" ]]; then
        PORT="$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$WORK/cirrusd.out" | head -n 1)"
        [[ -n "$PORT" ]] && break
    fi
    kill -0 "$SERVER_PID" 2> /dev/null || break
    sleep 0.1
done
if [[ -z "$PORT" ]]; then
    echo "cirrusd did not start:" >&2
    cat "$WORK/cirrusd.out" "$WORK/cirrusd.log" >&2
    exit 1
fi
echo "cirrusd listening on 127.0.0.1:$PORT"

echo "== sslyze --mozilla_config=modern"
status=0
"$VENV/bin/python" Scripts/lib/sslyze_alpn.py --mozilla_config=modern --certinfo_ca_file Certs/ca.pem \
    "localhost:$PORT{127.0.0.1}" > "$WORK/sslyze.txt" 2>&1 || status=$?
cat "$WORK/sslyze.txt"
# sslyze exits 0 when it could not connect at all, so compliance is read from its report.
if [[ $status -ne 0 ]] || ! grep -q "OK - Compliant" "$WORK/sslyze.txt"; then
    echo "TLS scan FAILED: cirrusd does not meet Mozilla's modern profile (see above)" >&2
    exit 1
fi
echo "TLS scan passed: cirrusd meets Mozilla's modern profile."
