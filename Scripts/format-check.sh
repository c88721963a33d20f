#!/usr/bin/env bash
# Lints the Swift sources with `swift format lint` (the toolchain's swift-format) and the
# repository's .swift-format: Sources/, Tests/, Examples/, Benchmarks/ and Fuzz/, generated code
# (Sources/CirrusWire/Generated) excluded.
#
# Fails on any finding of a rule the configuration enables (the code passes all of them today).
# Layout findings of the pretty-printer (Indentation, AddLines, RemoveLine, LineLength, Spacing,
# TrailingComma …) are counted and listed with --verbose, but fail only with --strict: the code
# base predates the configuration, and reformatting every file at once would collide with every
# open branch. Format a new file with `swift format -i FILE` before committing it.
#
#   Scripts/format-check.sh              rules must pass; layout findings counted
#   Scripts/format-check.sh --verbose    also list the layout findings
#   Scripts/format-check.sh --strict     layout findings fail too
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mode="${1:-}"
files=()
while IFS= read -r file; do files+=("$file"); done < <(
    git ls-files 'Sources/*.swift' 'Tests/*.swift' 'Examples/*.swift' 'Benchmarks/*.swift' 'Fuzz/*.swift' \
        | grep -v '^Sources/CirrusWire/Generated/'
)
findings="$(mktemp)"
trap 'rm -f "$findings"' EXIT
swift format lint --parallel --configuration .swift-format "${files[@]}" 2>"$findings" || true
python3 - "$findings" .swift-format "$mode" "${#files[@]}" <<'PY'
import json, re, sys
findings_path, configuration_path, mode, count = sys.argv[1:5]
rules = json.load(open(configuration_path))["rules"]
rule_findings, layout_findings, other = [], [], []
for line in open(findings_path, encoding="utf-8"):
    match = re.search(r": (?:warning|error): \[(\w+)\]", line)
    if not match:
        if line.strip():
            other.append(line.rstrip())
        continue
    (rule_findings if match.group(1) in rules else layout_findings).append(line.rstrip())
for line in other:
    print(line, file=sys.stderr)
for line in rule_findings:
    print(line, file=sys.stderr)
if mode in ("--verbose", "--strict"):
    for line in layout_findings:
        print(line, file=sys.stderr)
print(f"format-check: {count} files; {len(rule_findings)} rule findings; {len(layout_findings)} layout findings"
      + ("" if mode == "--strict" else " (not failing; --strict to fail on them)"))
if other or rule_findings or (mode == "--strict" and layout_findings):
    sys.exit(1)
PY
