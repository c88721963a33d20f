#!/usr/bin/env bash
# Compares builds of Cirrus under one `cirrus bench` workload, in alternated rounds on this
# machine: each round runs every build in turn, each with a fresh cirrusd and data directory,
# measured by that build's own cirrus. Prints every run and, per build, the mean of each
# round's ratio to the first build: throughput, and the CPU each process spent per operation.
#
#   Scripts/bench-compare.sh [--rounds 3] [--duration 6s] [--warmup 2s] [--out DIR] BUILD... [-- FLAGS]
#
# BUILD: a git revision (built in release once, from a worktree, into .build/compare/SHA) or a
# directory holding a release build's cirrusd and cirrus. FLAGS go to `cirrus bench` (default
# `--op modify --concurrency 64`; for 400-record saves `--op modify --records-per-op 400
# --concurrency 4`). The JSON of every run goes to DIR (default a temporary directory).
#
# Why alternated rounds: on a shared 2-core machine one build's figure moves by a quarter from
# one minute to the next, more than most changes do; two builds measured minutes apart compare
# the machine's minutes. Ratios taken within a round, averaged over rounds, compare the builds.
set -euo pipefail
invoked_from=$(pwd)
cd "$(dirname "$0")/.."
rounds=3
duration=6s
warmup=2s
out=""
builds=()
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    -*) echo "unknown argument: $1" >&2; exit 64 ;;
    *) builds+=("$1"); shift ;;
    esac
done
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--op modify --concurrency 64)
if [ ${#builds[@]} -lt 1 ]; then
    echo "usage: Scripts/bench-compare.sh [--rounds N] [--duration D] [--warmup D] BUILD... [-- FLAGS]" >&2
    exit 64
fi
case "$out" in
"") out=$(mktemp -d /tmp/cirrus-compare.XXXXXX) ;;
/*) ;;
*) out="$invoked_from/$out" ;;
esac
mkdir -p "$out"

# The directory holding BUILD's cirrusd and cirrus, building a revision when needed.
binaries() {
    local build="$1" sha dir tree given
    # A directory as the caller named it (relative to where the script was started).
    case "$build" in
    /*) given="$build" ;;
    *) given="$invoked_from/$build" ;;
    esac
    if [ -x "$given/cirrusd" ] && [ -x "$given/cirrus" ]; then
        (cd "$given" && pwd)
        return
    fi
    sha=$(git rev-parse --verify --quiet "$build^{commit}") || {
        echo "$build: neither a revision nor a directory with cirrusd and cirrus" >&2
        return 1
    }
    dir=".build/compare/$sha"
    if [ ! -x "$dir/cirrusd" ] || [ ! -x "$dir/cirrus" ]; then
        tree=$(mktemp -d /tmp/cirrus-compare-tree.XXXXXX)
        git worktree add --detach --quiet "$tree" "$sha"
        echo "building $build ($sha) in release: several minutes the first time" >&2
        if ! (cd "$tree" && swift build -c release --product cirrusd >&2 && swift build -c release --product cirrus >&2); then
            git worktree remove --force "$tree"
            echo "$build: the release build failed" >&2
            return 1
        fi
        mkdir -p "$dir"
        cp "$tree/.build/release/cirrusd" "$tree/.build/release/cirrus" "$dir/"
        git worktree remove --force "$tree"
    fi
    (cd "$dir" && pwd)
}

# A free loopback port.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

dirs=()
for build in "${builds[@]}"; do
    dirs+=("$(binaries "$build")")
done

server_pid=""
data=""
stop_server() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
    if [ -n "$data" ]; then rm -rf "$data"; data=""; fi
}
trap stop_server EXIT

for round in $(seq 1 "$rounds"); do
    for index in "${!builds[@]}"; do
        bin="${dirs[$index]}"
        port=$(free_port)
        metrics=$(free_port)
        data=$(mktemp -d /tmp/cirrus-compare-data.XXXXXX)
        "$bin/cirrusd" --port "$port" --data-dir "$data" --metrics-address "127.0.0.1:$metrics" >"$out/cirrusd.log" 2>&1 &
        server_pid=$!
        for _ in $(seq 1 300); do
            (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
            kill -0 "$server_pid" 2>/dev/null || { cat "$out/cirrusd.log" >&2; exit 1; }
            sleep 0.1
        done
        file="$out/round$round-build$index.json"
        "$bin/cirrus" bench --server "127.0.0.1:$port" --server-metrics "127.0.0.1:$metrics" \
            --duration "$duration" --warmup "$warmup" --json "$file" "${flags[@]}" >/dev/null
        stop_server
        python3 - "$file" "$round" "${builds[$index]}" <<'PY'
import json, sys
path, round_, build = sys.argv[1:4]
r = json.load(open(path))
cpu = r.get("cpu", {})
server = cpu.get("serverMicrosecondsPerOperation")
print(f"round {round_}  {build:<14} {r['operationsPerSecond']:>10,.0f} ops/s {r['recordsPerSecond']:>10,.0f} records/s"
      f"  cpu per operation: client {cpu.get('clientMicrosecondsPerOperation', 0):,.1f} µs, server "
      + (f"{server:,.1f} µs" if server is not None else "–"))
PY
    done
done

python3 - "$out" "$rounds" "${builds[@]}" <<'PY'
import json, sys
out, rounds, builds = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def run(round_, index):
    return json.load(open(f"{out}/round{round_}-build{index}.json"))
def figures(r):
    cpu = r.get("cpu", {})
    return (r["recordsPerSecond"], cpu.get("clientMicrosecondsPerOperation"), cpu.get("serverMicrosecondsPerOperation"))
print()
print(f"mean of {rounds} rounds' ratios to {builds[0]} (records/s higher is better; CPU lower is better):")
for index, build in enumerate(builds):
    ratios = [[], [], []]
    for round_ in range(1, rounds + 1):
        base, this = figures(run(round_, 0)), figures(run(round_, index))
        for k in range(3):
            if base[k] and this[k] is not None:
                ratios[k].append(this[k] / base[k])
    def mean(values):
        return f"{sum(values) / len(values):.3f}" if values else "–"
    print(f"  {build:<14} records/s {mean(ratios[0])}  client cpu/op {mean(ratios[1])}  server cpu/op {mean(ratios[2])}")
print(f"runs: {out}")
PY
