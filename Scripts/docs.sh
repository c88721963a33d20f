#!/usr/bin/env bash
# Builds the DocC archives (swiftlang/swift-docc-plugin): CirrusKit's (the client library,
# Sources/CirrusKit/CirrusKit.docc) with --warnings-as-errors, so a broken link or symbol
# reference, or an undocumented parameter, fails; and CirrusServer's (deployment, flags,
# storage, security: Sources/CirrusServer/CirrusServer.docc). The server's archive is built
# without --warnings-as-errors for now: its source comments still link to symbols of other
# modules (CirrusStore, CirrusWire), which DocC cannot resolve from CirrusServer's archive.
#
#   Scripts/docs.sh            build both archives into .build/plugins/Swift-DocC/outputs/
#   Scripts/docs.sh --preview  (macOS only) swift package --disable-sandbox preview-documentation --target CirrusKit
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--preview" ]; then
    exec swift package --disable-sandbox preview-documentation --target CirrusKit
fi
swift package generate-documentation --target CirrusKit --warnings-as-errors
swift package generate-documentation --target CirrusServer
echo "docs: .build/plugins/Swift-DocC/outputs/CirrusKit.doccarchive and CirrusServer.doccarchive"
