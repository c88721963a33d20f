#!/usr/bin/env bash
# Builds the release configuration of every Cirrus module, and the Benchmarks/ package, and fails
# on any Swift warning in Cirrus's own code (Sources/, Benchmarks/). Warnings of dependencies do
# not count: Swift has no per-package -warnings-as-errors that leaves dependencies alone, and
# unsafeFlags would make the package unusable as a dependency, so the build log is checked
# instead (a fresh build, as in CI, compiles every file and so prints every warning).
#
# One release build serves both: Benchmarks/ depends on the Cirrus libraries, and the
# executables (cirrusd, cirrus) and the modules only they use are built as products of that
# same dependency graph, in the same build directory.
#
# CI time: an optimized release build of everything took 1,147 s on the 2-core project machine
# under load (load average 9-13), too much for .ci/run's budget. By default this script builds
# the release configuration without the optimizer (-Xswiftc -Onone: still no DEBUG, release
# conditional compilation and whole-module builds, the same compiler warnings; 284 s on the
# same machine under load average 7-8). The C of the dependencies (two copies of BoringSSL,
# under postgres-nio) is compiled with -O0 too: one of them took 131 s to build at the release
# configuration's -O2 and 99 s at -O0 on the idle machine. --optimized builds it all optimized.
#
#   Scripts/check-release.sh              release configuration, -Onone and -O0 (what CI runs)
#   Scripts/check-release.sh --optimized  release configuration, optimized
set -euo pipefail
flags=(-Xswiftc -Onone -Xcc -O0)
if [ "${1:-}" = "--optimized" ]; then flags=(); fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
build() {
    swift build --package-path "$root/Benchmarks" -c release ${flags[@]+"${flags[@]}"} "$@" 2>&1 | tee -a "$log"
    return "${PIPESTATUS[0]}"
}
build
build --product cirrusd
build --product cirrus
# Both executables allocate with mimalloc (Sources/CMimalloc): glibc's own calls to malloc
# resolve to it, which holds only if the library comes first in the process's lookup order.
bin="$(swift build --package-path "$root/Benchmarks" -c release ${flags[@]+"${flags[@]}"} --show-bin-path)"
for executable in cirrusd cirrus; do
    bindings="$(LD_DEBUG=bindings "$bin/$executable" --help 2>&1 >/dev/null)"
    if ! grep -q "libc\.so\.6 .* to .*libmimalloc\.so[.0-9]* .*symbol \`malloc'" <<<"$bindings"; then
        echo "check-release: $executable does not allocate with mimalloc" >&2
        exit 1
    fi
done
if grep -E "/(Sources|Benchmarks)/[^:]+\.swift:[0-9]+:[0-9]+: (warning|error):" "$log" | grep -v "/\.build/"; then
    echo "check-release: Swift warnings in Cirrus's code (above)" >&2
    exit 1
fi
echo "check-release: release build of every Cirrus module and of Benchmarks/ without warnings"
