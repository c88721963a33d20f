#!/usr/bin/env bash
# Builds and runs cirrusd (release build). With no arguments it listens on 127.0.0.1:7443
# with the development certificates in Certs/. Arguments go to cirrusd (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/lib/ensure-packages.sh
ensure_packages
swift build -c release --product cirrusd >&2
exec .build/release/cirrusd "$@"
