#!/usr/bin/env bash
# The test command: installs what the tests need (idempotent), starts a
# throwaway PostgreSQL cluster for the store tests (a temporary data
# directory, a free port on 127.0.0.1, stopped and removed at the end), then
# runs every test. Works on a fresh machine with only the Rust toolchain,
# Node.js and apt available.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh

pg_bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
cluster="$(mktemp -d /tmp/flowc-postgres.XXXXXX)"
# initdb refuses to run as root: the cluster then belongs to the
# `postgres` user the Debian package creates.
as_cluster_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    chown -R postgres "$cluster"
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}
stop_cluster() {
  as_cluster_owner "$pg_bin/pg_ctl" -D "$cluster/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$cluster"
}
trap stop_cluster EXIT
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
as_cluster_owner "$pg_bin/initdb" -D "$cluster/data" -U flowc --auth=trust -E UTF8 >/dev/null
as_cluster_owner "$pg_bin/pg_ctl" -D "$cluster/data" -l "$cluster/log" -w \
  -o "-p $port -k $cluster -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
echo "test: PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port"
export FLOWC_TEST_POSTGRES="postgres://flowc@127.0.0.1:$port/postgres"

cargo test
