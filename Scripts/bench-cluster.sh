#!/usr/bin/env bash
# Measures cirrusd on SQLite, on PostgreSQL (one node) and on PostgreSQL (three nodes) in one
# run, with `cirrus bench` (release build), and pgbench's simple-update rate on the same
# PostgreSQL server as the reference for what the database itself allows here.
#
#   Scripts/bench-cluster.sh [--duration 10s] [--out DIR]
#
# Everything runs on loopback: one SQLite cirrusd, then Scripts/run-cluster.sh's PostgreSQL and
# three nodes. Each workload: 2 s of warm-up, then --duration of measurement. The results go to
# DIR (default a temporary directory): one JSON file per run and summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=10s
out=""
while [ $# -gt 0 ]; do
    case "$1" in
    --duration) duration="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 64 ;;
    esac
done
out=${out:-$(mktemp -d /tmp/cirrus-bench.XXXXXX)}
mkdir -p "$out"
swift build -c release --product cirrusd >&2
swift build -c release --product cirrus >&2
bin=$(swift build -c release --show-bin-path)

# The workloads: name, then cirrus bench's flags.
workloads=(
    "modify x1, 64 in flight|--op modify --concurrency 64"
    "modify x400, 4 in flight|--op modify --records-per-op 400 --concurrency 4"
    "fetch x1, 64 in flight|--op fetch --concurrency 64"
    "query, 16 in flight|--op query --concurrency 16"
)
summary="$out/summary.txt"
: >"$summary"

run_workloads() { # label, server list, extra flags
    local label="$1" servers="$2"
    shift 2
    local entry name flags file
    for entry in "${workloads[@]}"; do
        name="${entry%%|*}"
        flags="${entry#*|}"
        file="$out/$(echo "$label-$name" | tr -c 'a-zA-Z0-9\n' '-').json"
        # shellcheck disable=SC2086
        "$bin/cirrus" bench --server "$servers" $flags "$@" --warmup 2s --duration "$duration" --json "$file" >/dev/null
        python3 - "$file" "$label" "$name" >>"$summary" <<'PY'
import json, sys
path, label, name = sys.argv[1:4]
result = json.load(open(path))
errors = sum(result.get("errorsByCode", {}).values())
p50 = result["latency"]["p50"] / 1000
p99 = result["latency"]["p99"] / 1000
print(f"{label:<20} {name:<26} {result['operationsPerSecond']:>9.0f} ops/s {result['recordsPerSecond']:>9.0f} records/s"
      f"  p50 {p50:7.1f} ms  p99 {p99:7.1f} ms  errors {errors}")
PY
        tail -1 "$summary" >&2
    done
}

# 1. One node on SQLite.
sqlite_dir=$(mktemp -d /tmp/cirrus-bench-sqlite.XXXXXX)
"$bin/cirrusd" --port 0 --data-dir "$sqlite_dir" >"$out/sqlite.out" 2>"$out/sqlite.log" &
sqlite_pid=$!
for _ in $(seq 300); do grep -q "^listening on" "$out/sqlite.out" && break; sleep 0.1; done
sqlite_port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$out/sqlite.out")
run_workloads "SQLite, 1 node" "127.0.0.1:$sqlite_port"
kill -TERM "$sqlite_pid"
wait "$sqlite_pid" || true
rm -rf "$sqlite_dir"

# 2. PostgreSQL: Scripts/run-cluster.sh's server and three nodes.
base_port=$((20000 + RANDOM % 20000))
Scripts/run-cluster.sh --nodes 3 --base-port "$base_port" >"$out/cluster.out" 2>"$out/cluster.log" &
cluster_pid=$!
trap 'kill -TERM $cluster_pid 2>/dev/null; wait $cluster_pid 2>/dev/null || true' EXIT
for _ in $(seq 1200); do grep -q "^Ctrl-C" "$out/cluster.out" && break; sleep 0.5; done
grep -q "^Ctrl-C" "$out/cluster.out" || { cat "$out/cluster.log" >&2; exit 1; }
nodes="127.0.0.1:$base_port,127.0.0.1:$((base_port + 1)),127.0.0.1:$((base_port + 2))"
psql_line=$(grep "psql -h" "$out/cluster.out")
socket_dir=$(echo "$psql_line" | awk '{print $3}')
pg_port=$(echo "$psql_line" | awk '{print $5}')
as_postgres=()
[ "$(id -u)" -eq 0 ] && as_postgres=(runuser -u postgres --)
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
# A new database has no planner statistics until its tables are first analyzed (by the node
# after its first 500 items, or autovacuum): fill it a little, then ANALYZE, so every run
# measures the plans a database in service has.
"$bin/cirrus" bench --server "127.0.0.1:$base_port" --op modify --concurrency 16 --duration 3s >/dev/null
"${as_postgres[@]}" "$pg_bin/psql" -X -q -h "$socket_dir" -p "$pg_port" -U postgres -d cirrus -c ANALYZE
run_workloads "PostgreSQL, 1 node" "127.0.0.1:$base_port"
run_workloads "PostgreSQL, 3 nodes" "$nodes" --spread --connections 3

# 3. pgbench's simple update on the same server (its own database), 64 clients.
pgbench=$pg_bin/pgbench
"${as_postgres[@]}" "$pg_bin/createdb" -h "$socket_dir" -p "$pg_port" -U postgres pgbench
"${as_postgres[@]}" "$pgbench" -h "$socket_dir" -p "$pg_port" -U postgres -i -q -s 10 pgbench >/dev/null 2>&1
seconds=${duration%s}
"${as_postgres[@]}" "$pgbench" -h "$socket_dir" -p "$pg_port" -U postgres -b simple-update -c 64 -j 2 \
    -T "$seconds" pgbench >"$out/pgbench.txt" 2>&1
tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$out/pgbench.txt" | head -1)
printf '%-22s %-28s tps   %10.0f\n' "pgbench" "simple-update, 64 clients" "$tps" | tee -a "$summary" >&2
echo "results in $out" >&2
