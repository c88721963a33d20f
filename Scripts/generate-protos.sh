#!/usr/bin/env bash
# Regenerates everything derived from Protos/cirrus/**/*.proto:
#   Sources/CCirrusProto/include/cirrus/…/*.pb-c.h   protoc-c headers
#   Sources/CCirrusProto/cirrus/…/*.pb-c.c           protoc-c sources
#   Sources/CirrusWire/Generated/*.pb.swift           Swift message types
#   Tests/CirrusWireTests/Generated/AllMessagesRoundTrip.swift
#
# Usage: Scripts/generate-protos.sh [OUTPUT_ROOT]
#   OUTPUT_ROOT defaults to the package root (check-generated.sh passes a temp dir).
#   PROTO_ROOT (environment) overrides the proto directory (default: Protos).
#
# Needs (installs nothing): protoc-c 1.4 (apt: protobuf-c-compiler) and python3 (standard library only).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root}"
protos="${PROTO_ROOT:-$root/Protos}"
protos="$(cd "$protos" && pwd)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Sorted, relative paths: protoc output and the descriptor set do not depend
# on directory order or on where the repository lives.
mapfile -t files < <(cd "$protos" && find . -name '*.proto' -print | sed 's|^\./||' | LC_ALL=C sort)
if [ "${#files[@]}" -eq 0 ]; then
    echo "generate-protos: no .proto files under $protos" >&2
    exit 1
fi

mkdir -p "$work/c"
(
    cd "$protos"
    protoc-c --proto_path=. --c_out="$work/c" "${files[@]}"
    protoc-c --proto_path=. --descriptor_set_out="$work/descriptors.pb" \
        --include_imports --include_source_info "${files[@]}"
)

mkdir -p "$work/staged/include" "$work/staged/src" "$work/swift" "$work/tests"
(
    cd "$work/c"
    find . -name '*.pb-c.h' -print | while read -r header; do
        mkdir -p "$work/staged/include/$(dirname "$header")"
        cp "$header" "$work/staged/include/$header"
    done
    find . -name '*.pb-c.c' -print | while read -r source; do
        mkdir -p "$work/staged/src/$(dirname "$source")"
        cp "$source" "$work/staged/src/$source"
    done
)
python3 "$root/Scripts/protoc-gen-swift-cirrus.py" "$work/descriptors.pb" "$work/swift" "$work/tests"

# Replace the generated trees only once everything above succeeded.
c_target="$out/Sources/CCirrusProto"
mkdir -p "$c_target/include" "$out/Sources/CirrusWire" "$out/Tests/CirrusWireTests"
for top in $(cd "$work/staged/include" && ls); do
    rm -rf "${c_target:?}/include/$top" "${c_target:?}/$top"
done
cp -R "$work/staged/include/." "$c_target/include/"
cp -R "$work/staged/src/." "$c_target/"
rm -rf "$out/Sources/CirrusWire/Generated" "$out/Tests/CirrusWireTests/Generated"
cp -R "$work/swift" "$out/Sources/CirrusWire/Generated"
cp -R "$work/tests" "$out/Tests/CirrusWireTests/Generated"
