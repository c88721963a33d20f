#!/usr/bin/env bash
# Proves that what README.md shows a library user compiles with `import CirrusKit` alone:
# the first Swift block of each README section below must equal its example's main.swift byte
# for byte, and the Examples package (which depends on the product CirrusKit only) must build
# without Swift warnings.
#
#   "## A client"     → Examples/ReadmeClient/main.swift
#   "## Sync engine"  → Examples/ReadmeSyncEngine/main.swift
#
# Examples/SeedSamples holds the 22 Swift samples of seed 002 ("CloudKit Operations", the
# reference the project was specified from), each between "// BEGIN seed sample" and
# "// END seed sample" inside a function that supplies the values it uses. When the seed file
# is at hand ($CIRRUS_SEED_002, else ../shared/seeds/002_*.txt beside the repository), every
# sample must be there line for line (indentation aside; one documented line differs, see
# Examples/SeedSamples/Configuration.swift). Its only allowed warnings are the seed's own
# unused values ([#no-usage] in Examples/SeedSamples).
#
#   Scripts/check-examples.sh           check, then build Examples/
#   Scripts/check-examples.sh --update  write the README blocks into the examples' main.swift
#
# The Examples package is built as a user's package is, depending on Cirrus by
# `.package(url:from:)` (a tagged clone of the working tree). Then it runs Examples/NotesSync
# (two devices syncing through push and change feeds) and the README client example against a
# cirrusd on a free loopback port with a fresh data directory (the debug cirrusd the tests
# built, or one it builds).
#
# Needs: python3 (standard library only) and the Swift toolchain.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fresh="$(mktemp)"
trap 'rm -f "$fresh"' EXIT

# check SECTION_TITLE EXAMPLE_DIRECTORY
check() {
    local title="$1" example="$root/Examples/$2/main.swift"
    # The first ```swift block after the "## TITLE" heading.
    python3 - "$root/README.md" "$fresh" "$title" <<'PY'
import sys
text = open(sys.argv[1], encoding="utf-8").read()
title = sys.argv[3]
start = text.find("\n## " + title + "\n")
if start < 0:
    sys.exit("check-examples: README.md has no '## " + title + "' section")
open_fence = text.find("\n```swift\n", start)
next_section = text.find("\n## ", start + 1)
if open_fence < 0 or (0 <= next_section < open_fence):
    sys.exit("check-examples: README.md's '" + title + "' section has no ```swift block")
body_start = open_fence + len("\n```swift\n")
body_end = text.find("\n```\n", body_start)
if body_end < 0:
    sys.exit("check-examples: README.md's '" + title + "' example is not closed")
open(sys.argv[2], "w", encoding="utf-8").write(text[body_start:body_end + 1])
PY
    if [ "${update:-}" = 1 ]; then
        cp "$fresh" "$example"
        echo "check-examples: wrote $example from README.md"
        return
    fi
    if ! diff -u "$example" "$fresh"; then
        echo "check-examples: README.md's '$title' example and ${example#$root/} differ;" >&2
        echo "  run Scripts/check-examples.sh --update after changing the README." >&2
        exit 1
    fi
    echo "check-examples: README's '$title' example is ${example#$root/}"
}

# check_seed_samples: every ```swift block of the seed is one BEGIN/END region of SeedSamples.
check_seed_samples() {
    local seed="${CIRRUS_SEED_002:-}"
    if [ -z "$seed" ]; then seed="$(ls "$root"/../shared/seeds/002_*.txt 2>/dev/null | head -n 1 || true)"; fi
    if [ -z "$seed" ] || [ ! -f "$seed" ]; then
        echo "check-examples: seed 002 not found (set CIRRUS_SEED_002); Examples/SeedSamples is built but not compared"
        return
    fi
    python3 - "$seed" "$root/Examples/SeedSamples" <<'PY'
import glob, re, sys
seed = open(sys.argv[1], encoding="utf-8").read()
blocks = re.findall(r"```swift\n(.*?)```", seed, re.S)
# The one line the examples change, and why: see Configuration.swift.
changed = {"operation.configuration.longLivedOperationWasPersistedBlock = {": "operation.longLivedOperationWasPersistedBlock = {"}
def lines(text):
    return [changed.get(l.strip(), l.strip()) for l in text.splitlines() if l.strip()]
regions = []
for path in sorted(glob.glob(sys.argv[2] + "/*.swift")):
    text = open(path, encoding="utf-8").read()
    for body in re.findall(r"// BEGIN seed sample\n(.*?)\n\s*// END seed sample", text, re.S):
        regions.append([l for l in lines(body) if not l.startswith("// The seed sets") and not l.startswith("// the operation. The one line")])
missing = [i for i, b in enumerate(blocks) if lines(b) not in regions]
if missing or len(regions) != len(blocks):
    for i in missing:
        print("check-examples: seed sample %d is not in Examples/SeedSamples as written:\n%s" % (i + 1, blocks[i]), file=sys.stderr)
    sys.exit("check-examples: %d seed samples, %d in Examples/SeedSamples, %d missing" % (len(blocks), len(regions), len(missing)))
print("check-examples: all %d seed 002 samples are in Examples/SeedSamples as written" % len(blocks))
PY
}

update=0
if [ "${1:-}" = "--update" ]; then update=1; fi
check "A client" ReadmeClient
check "Sync engine" ReadmeSyncEngine
if [ "$update" = 1 ]; then exit 0; fi
check_seed_samples
# The Examples package is built as a library user's package is: copied beside a clone of this
# repository (its working tree as a commit, so uncommitted changes count) tagged 0.1.0, with
# its path dependency replaced by `.package(url:from:)` naming that clone. One build then
# proves both that the examples compile with `import CirrusKit` alone and that Cirrus resolves
# and builds by URL.
work="$(mktemp -d)"
log="$work/build.log"
trap 'rm -rf "$work"; rm -f "$fresh"' EXIT
snapshot="$(git -C "$root" stash create 2>/dev/null || true)"
git clone -q "$root" "$work/cirrus"
if [ -n "$snapshot" ]; then
    git -C "$root" push -q "$work/cirrus" "$snapshot:refs/heads/working-tree"
    git -C "$work/cirrus" checkout -q working-tree
fi
git -C "$work/cirrus" tag -f 0.1.0 >/dev/null
mkdir -p "$work/Examples"
tar -C "$root/Examples" --exclude=./.build --exclude='./.build*' -cf - . | tar -C "$work/Examples" -xf -
python3 - "$work/Examples/Package.swift" "file://$work/cirrus" <<'PY'
import sys
path, url = sys.argv[1], sys.argv[2]
text = open(path, encoding="utf-8").read()
by_path = '.package(name: "Cirrus", path: "..")'
if by_path not in text:
    sys.exit("check-examples: Examples/Package.swift no longer depends on " + by_path)
text = text.replace(by_path, '.package(url: "%s", from: "0.1.0")' % url)
text = text.replace('package: "Cirrus")', 'package: "cirrus")')
open(path, "w", encoding="utf-8").write(text)
PY
swift build --package-path "$work/Examples" 2>&1 | tee "$log"
# No Swift warnings in the examples (SwiftPM does not show a dependency's warnings;
# Scripts/check-release.sh checks Cirrus's own sources).
if grep -E "Examples/[^:]+\.swift:[0-9]+:[0-9]+: warning:" "$log" | grep -vE "Examples/SeedSamples/[^:]+\.swift:[0-9]+:[0-9]+: warning: .*\[#no-usage\]$"; then
    echo "check-examples: Swift warnings (above)" >&2
    exit 1
fi
examples="$(swift build --package-path "$work/Examples" --show-bin-path)"
echo "check-examples: Examples/ builds with import CirrusKit alone, depending on Cirrus by .package(url:from:)"

# NotesSync against a live server.
swift build --package-path "$root" --product cirrusd >/dev/null
server_dir="$work/server"
mkdir -p "$server_dir"
"$root/.build/debug/cirrusd" --port 0 --data-dir "$server_dir/data" \
    --cert "$root/Certs/server.pem" --key "$root/Certs/server-key.pem" --client-ca "$root/Certs/ca.pem" \
    >"$server_dir/log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; rm -rf "$work"; rm -f "$fresh"' EXIT
address=""
for _ in $(seq 1 600); do   # up to 60 s on a loaded machine
    address="$(sed -n 's/^listening on \([0-9.]*:[0-9]*\)$/\1/p' "$server_dir/log" | head -n 1)"
    if [ -n "$address" ] || ! kill -0 "$server_pid" 2>/dev/null; then break; fi
    sleep 0.1
done
if [ -z "$address" ]; then
    cat "$server_dir/log" >&2
    echo "check-examples: cirrusd did not start" >&2
    exit 1
fi
CIRRUS_SERVER="$address" CIRRUS_CA="$root/Certs/ca.pem" CIRRUS_CERT="$root/Certs/alice.pem" \
    CIRRUS_KEY="$root/Certs/alice-key.pem" "$examples/NotesSync"
echo "check-examples: NotesSync kept two devices in sync against cirrusd at $address"

# The README's client example, run against the same server: it must finish without error.
readme_out="$server_dir/readme-client.out"
if ! CIRRUS_SERVER="$address" CIRRUS_CA="$root/Certs/ca.pem" CIRRUS_CERT="$root/Certs/alice.pem" \
    CIRRUS_KEY="$root/Certs/alice-key.pem" "$examples/ReadmeClient" >"$readme_out" 2>&1 \
    || ! grep -qx "Groceries" "$readme_out"; then
    cat "$readme_out" >&2
    echo "check-examples: the README's client example failed against cirrusd" >&2
    exit 1
fi
echo "check-examples: the README's client example ran against cirrusd at $address"
