#!/usr/bin/env bash
# A local Cirrus cluster: one PostgreSQL server and three cirrusd nodes sharing it, all on
# loopback, everything in one temporary directory that goes when the script ends (Ctrl-C).
#
#   Scripts/run-cluster.sh [--nodes N] [--base-port PORT] [--debug] [--keep]
#
# --nodes N        cirrusd nodes (default 3), on ports PORT, PORT+1, … (default 7443)
# --base-port P    the first node's port
# --debug          run the debug build (faster to build; slower to serve) instead of release
# --keep           keep the directory (data, logs) after the end
#
# PostgreSQL comes from Debian's `postgresql` package, installed when missing. It refuses to
# run as root, so as root its commands run as the `postgres` user. Its data is durable
# (fsync and synchronous_commit on), its role has a random password that reaches the nodes
# through CIRRUSD_DATABASE (never their command lines). The nodes share one data directory:
# with --database it holds only the asset files, which every node must see.
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/lib/ensure-packages.sh

nodes=3
base_port=7443
configuration=release
keep=0
while [ $# -gt 0 ]; do
    case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --base-port) base_port="$2"; shift 2 ;;
    --debug) configuration=debug; shift ;;
    --keep) keep=1; shift ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 64 ;;
    esac
done
case "$nodes" in '' | *[!0-9]* | 0) echo "--nodes must be a positive number" >&2; exit 64 ;; esac

ensure_packages postgresql
binaries=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$binaries/initdb" ] || { echo "no PostgreSQL binaries under /usr/lib/postgresql" >&2; exit 1; }

echo "building cirrusd ($configuration)…" >&2
swift build -c "$configuration" --product cirrusd >&2
cirrusd="$(swift build -c "$configuration" --show-bin-path)/cirrusd"

dir=$(mktemp -d /tmp/cirrus-cluster.XXXXXX)
chmod 755 "$dir"
mkdir -p "$dir/pg" "$dir/shared"
as_postgres=()
if [ "$(id -u)" -eq 0 ]; then
    chown postgres:postgres "$dir/pg"
    as_postgres=(runuser -u postgres --)
fi
pids=()
cleanup() {
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    "${as_postgres[@]}" "$binaries/pg_ctl" -D "$dir/pg/data" -m fast -w stop >/dev/null 2>&1 || true
    if [ "$keep" -eq 1 ]; then echo "kept $dir" >&2; else rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

password=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')
pg_port=$(free_port)
printf '%s\n' "$password" >"$dir/pg/superuser-password"
[ "${#as_postgres[@]}" -eq 0 ] || chown postgres:postgres "$dir/pg/superuser-password"
"${as_postgres[@]}" "$binaries/initdb" -D "$dir/pg/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    --pwfile="$dir/pg/superuser-password" -E UTF8 --no-locale >"$dir/pg/initdb.log"
"${as_postgres[@]}" "$binaries/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/server.log" -w -t 120 \
    -o "-p $pg_port -k $dir/pg -c listen_addresses=127.0.0.1 -c max_connections=$((30 * nodes + 100))" start >/dev/null
psql_admin() { "${as_postgres[@]}" "$binaries/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir/pg" -p "$pg_port" -U postgres "$@"; }
psql_admin -d postgres -c "CREATE ROLE cirrus LOGIN PASSWORD '$password'" -c "CREATE DATABASE cirrus OWNER cirrus"
echo "PostgreSQL $("$binaries/postgres" --version | awk '{print $3}') on 127.0.0.1:$pg_port (data in $dir/pg)" >&2

servers=()
for ((i = 0; i < nodes; i++)); do
    port=$((base_port + i))
    log="$dir/node-$((i + 1)).log"
    CIRRUSD_DATABASE="postgres://cirrus:$password@127.0.0.1:$pg_port/cirrus?sslmode=disable" \
        "$cirrusd" --port "$port" --data-dir "$dir/shared" --database-connections 20 >"$log" 2>&1 &
    pids+=($!)
    # Each node prints "listening on HOST:PORT" once it serves (after the schema is migrated:
    # nodes starting together take turns at an advisory lock).
    for _ in $(seq 600); do
        grep -q "^listening on" "$log" && break
        kill -0 "${pids[-1]}" 2>/dev/null || { echo "node $((i + 1)) exited:" >&2; tail -20 "$log" >&2; exit 1; }
        sleep 0.1
    done
    grep -q "^listening on" "$log" || { echo "node $((i + 1)) did not start in 60 s:" >&2; tail -20 "$log" >&2; exit 1; }
    servers+=("127.0.0.1:$port")
done

list=$(IFS=,; echo "${servers[*]}")
cat <<EOF

$nodes cirrusd nodes on one PostgreSQL database: ${servers[*]}
Logs: $dir/node-*.log, $dir/pg/server.log

Point a client at them (the first that answers; the next after a failure):
  export CIRRUS_SERVER=$list
  .build/$configuration/cirrus zones list
Load them, each connection on the next node in turn:
  .build/$configuration/cirrus bench --server $list --spread --connections 6 --concurrency 64 --duration 30s
The database itself, for pgbench or psql (password in $dir/pg/superuser-password):
  psql -h $dir/pg -p $pg_port -U postgres cirrus

Ctrl-C stops the nodes and PostgreSQL$([ "$keep" -eq 1 ] && echo " and keeps $dir" || echo " and removes $dir").
EOF
wait -n "${pids[@]}" || true
echo "a node exited; stopping the cluster" >&2
