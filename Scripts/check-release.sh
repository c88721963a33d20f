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
#   Scripts/check-release.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
build() {
    swift build --package-path "$root/Benchmarks" -c release "$@" 2>&1 | tee -a "$log"
    return "${PIPESTATUS[0]}"
}
build
build --product cirrusd
build --product cirrus
if grep -E "/(Sources|Benchmarks)/[^:]+\.swift:[0-9]+:[0-9]+: (warning|error):" "$log" | grep -v "/\.build/"; then
    echo "check-release: Swift warnings in Cirrus's code (above)" >&2
    exit 1
fi
echo "check-release: release build of every Cirrus module and of Benchmarks/ without warnings"
