#!/usr/bin/env bash
# Builds the libFuzzer targets of Fuzz/ (release, -sanitize=fuzzer) and runs each for a bounded
# time, starting from its committed seed corpus in Fuzz/Corpus/TARGET, one target per core at a
# time (CIRRUS_FUZZ_JOBS to choose how many). Fails when any target
# finds a crash, a timeout or runs out of memory; the input that did it is written to
# Fuzz/.build/fuzz-artifacts/. For each target it prints the executions per second and the
# coverage reached (libFuzzer's final `cov:` edges and `ft:` features).
#
#   Scripts/fuzz.sh                   every target, 30 s each
#   Scripts/fuzz.sh --unoptimized all 30
#                                     the same, built with -Onone (what CI runs: the build
#                                     takes a fraction of the time, each target runs slower)
#   Scripts/fuzz.sh all 600           every target, 10 minutes each
#   Scripts/fuzz.sh FuzzPredicate 3600
#   Scripts/fuzz.sh --seeds           regenerate Fuzz/Corpus/*/seed-* from the targets themselves
#
# New inputs the fuzzer finds go to Fuzz/.build/fuzz-corpus/TARGET, never into the committed
# corpus; copy the interesting ones (and every crashing input) into Fuzz/Corpus/TARGET.
# CIRRUS_FUZZ_SANITIZERS adds sanitizers to the build, e.g. CIRRUS_FUZZ_SANITIZERS=address.
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/lib/ensure-packages.sh

TARGETS=(FuzzFrame FuzzRequest FuzzPredicate FuzzToken FuzzCSVImport FuzzJSONLImport)

usage() {
    echo "usage: Scripts/fuzz.sh [--unoptimized] [all|TARGET] [SECONDS]   or   Scripts/fuzz.sh [--unoptimized] --seeds" >&2
    echo "targets: ${TARGETS[*]}" >&2
    exit 2
}

mode=run
optimize=yes
while [ $# -gt 0 ]; do
    case "$1" in
        --seeds) mode=seeds ;;
        --unoptimized) optimize=no ;;
        *) break ;;
    esac
    shift
done
which="${1:-all}"
seconds="${2:-30}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || usage
if [ "$which" = "all" ]; then
    selected=("${TARGETS[@]}")
else
    [[ " ${TARGETS[*]} " == *" $which "* ]] || usage
    selected=("$which")
fi

ensure_packages
# Swift's own crash backtracer would take the signal from libFuzzer, which then saves no input.
export SWIFT_BACKTRACE=enable=no
build_flags=(-c release --sanitize=fuzzer -Xswiftc -enable-testing)
if [ "$optimize" = no ]; then
    # Its own build directory, so switching between the two never rebuilds either.
    build_flags+=(-Xswiftc -Onone --scratch-path Fuzz/.build-onone)
fi
for sanitizer in ${CIRRUS_FUZZ_SANITIZERS:-}; do
    build_flags+=("--sanitize=$sanitizer")
done
echo "== building the fuzz targets (swift build --package-path Fuzz ${build_flags[*]})"
swift build --package-path Fuzz "${build_flags[@]}"
bin="$(swift build --package-path Fuzz "${build_flags[@]}" --show-bin-path)"

if [ "$mode" = "seeds" ]; then
    for target in "${selected[@]}"; do
        rm -f Fuzz/Corpus/"$target"/seed-*
        CIRRUS_FUZZ_WRITE_SEEDS="$PWD/Fuzz/Corpus/$target" "$bin/$target" -runs=0
        echo "$target: $(ls Fuzz/Corpus/"$target" | wc -l) files in Fuzz/Corpus/$target"
    done
    exit 0
fi

work=Fuzz/.build/fuzz-corpus
artifacts=Fuzz/.build/fuzz-artifacts
mkdir -p "$artifacts"
# Targets run side by side, one per core (CIRRUS_FUZZ_JOBS, default the number of cores): each
# still runs for its whole time on a core of its own, and on 2 cores CI's six targets fuzz for
# 90 s in all instead of 180.
jobs="${CIRRUS_FUZZ_JOBS:-$(nproc)}"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "CIRRUS_FUZZ_JOBS must be a positive number" >&2; exit 2; }
fuzz() {
    local target="$1"
    mkdir -p "$work/$target"
    local options=(
        -max_total_time="$seconds" -print_final_stats=1
        -timeout=10 -rss_limit_mb=2048 -max_len=8192
        -artifact_prefix="$artifacts/$target-"
    )
    [ -f "Fuzz/Dictionaries/$target.dict" ] && options+=(-dict="Fuzz/Dictionaries/$target.dict")
    local log="$artifacts/$target.log"
    local status=0
    "$bin/$target" "${options[@]}" "$work/$target" "Fuzz/Corpus/$target" >"$log" 2>&1 || status=$?
    local execs_per_second executions coverage line
    execs_per_second=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    coverage=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
    line=$(printf '%-16s %9s exec/s  %10s runs  %s' "$target" "${execs_per_second:-?}" "${executions:-?}" "${coverage:-cov: ? ft: ?}")
    if [ "$status" -ne 0 ]; then
        line="$line  FAILED (exit $status, see $log)"
        grep -E '^==[0-9]+==|ERROR: libFuzzer|^SUMMARY|Test unit written|Fatal error|deadly signal|timeout' "$log" | head -20 >&2 || true
    fi
    echo "$line"
    echo "$line" >"$artifacts/$target.result"
    return "$status"
}
running=0
for target in "${selected[@]}"; do
    rm -f "$artifacts/$target.result"
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    echo "== $target for ${seconds}s"
    fuzz "$target" &
    running=$((running + 1))
done
wait || true
failed=()
summary=()
for target in "${selected[@]}"; do
    line="$(cat "$artifacts/$target.result" 2>/dev/null || printf '%-16s  FAILED (no result, see %s)' "$target" "$artifacts/$target.log")"
    [[ "$line" == *FAILED* ]] && failed+=("$target")
    summary+=("$line")
done

echo "== fuzzing summary (${seconds}s per target)"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzzing found problems in: ${failed[*]} (inputs in $artifacts)" >&2
    exit 1
fi
