#!/usr/bin/env bash
# Installs what the build needs (Debian packages), builds, and runs every test.
# Arguments go to `swift test` (e.g. --filter CirrusWireTests).
#
# Swift Testing starts every test at once unless told otherwise. Hundreds of end-to-end tests,
# each with servers, TLS handshakes and SQLite writers, then share two cores: on a machine
# loaded by other builds (load average 12) the requests of 29 tests waited past their 60 s
# timeouts. At most CIRRUS_TEST_WIDTH tests (default 16) run at a time; with 16 the whole
# suite passed on the same loaded machine.
#
# The run's output goes to the terminal as it comes and to a log. When the run fails, the
# failing tests' lines are printed again at the end, so that a CI log of which only the tail
# is kept still says which test failed and why.
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/lib/ensure-packages.sh
ensure_packages postgresql
swift build --build-tests

log=$(mktemp "${TMPDIR:-/tmp}/cirrus-test-log.XXXXXX")
trap 'rm -f "$log"' EXIT
run_tests() {
    status=0
    swift test --skip-build --experimental-maximum-parallelization-width "${CIRRUS_TEST_WIDTH:-16}" "$@" 2>&1 |
        tee "$log" || status=$?
}
run_tests "$@"
if [[ $status -ne 0 ]]; then
    echo "== the tests failed (exit $status); what they reported:"
    # Swift Testing marks failures with ✘; XCTest and the test runner itself write error: lines.
    grep -E '✘|recorded an issue|error:|Fatal error|Test crashed|signal [0-9]+' "$log" |
        grep -v ' TLS failed: ' | tail -n 60 || true
fi
exit "$status"
