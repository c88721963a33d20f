#!/usr/bin/env bash
# Installs what the build needs (Debian packages), builds, and runs every test.
# Arguments go to `swift test` (e.g. --filter CirrusWireTests).
#
# Swift Testing starts every test at once unless told otherwise. Hundreds of end-to-end tests,
# each with servers, TLS handshakes and SQLite writers, then share two cores: on a machine
# loaded by other builds (load average 12) the requests of 29 tests waited past their 60 s
# timeouts. At most CIRRUS_TEST_WIDTH tests (default 16) run at a time; with 16 the whole
# suite passed on the same loaded machine.
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/lib/ensure-packages.sh
ensure_packages postgresql
swift build --build-tests
exec swift test --skip-build --experimental-maximum-parallelization-width "${CIRRUS_TEST_WIDTH:-16}" "$@"
