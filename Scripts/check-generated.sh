#!/usr/bin/env bash
# Fails (exit 1, listing the differences) when the committed generated code is
# not exactly what Scripts/generate-protos.sh makes from Protos/.
#
# Needs (installs nothing): protoc-c 1.4 (apt: protobuf-c-compiler) and python3 (standard library only).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fresh="$(mktemp -d)"
trap 'rm -rf "$fresh"' EXIT

"$root/Scripts/generate-protos.sh" "$fresh"

status=0
for dir in Sources/CCirrusProto/include/cirrus Sources/CCirrusProto/cirrus \
           Sources/CirrusWire/Generated Tests/CirrusWireTests/Generated; do
    if ! diff -r "$root/$dir" "$fresh/$dir" >"$fresh/diff.txt" 2>&1; then
        status=1
        echo "check-generated: $dir differs from what Protos/ generates:" >&2
        grep -E '^(Only in|diff )' "$fresh/diff.txt" | sed 's/^/  /' >&2 || cat "$fresh/diff.txt" >&2
    fi
done
if [ "$status" -ne 0 ]; then
    echo "check-generated: run Scripts/generate-protos.sh and commit the result." >&2
else
    echo "check-generated: generated code is up to date."
fi
exit "$status"
