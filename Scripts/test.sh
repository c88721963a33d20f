#!/usr/bin/env bash
# Installs what the build needs (Debian packages), builds, and runs every test.
# Arguments go to `swift test` (e.g. --filter CirrusWireTests).
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/lib/ensure-packages.sh
ensure_packages postgresql
swift build --build-tests
exec swift test --skip-build "$@"
