#!/usr/bin/env bash
# The test command: installs what the tests need (idempotent), starts a
# throwaway PostgreSQL cluster for the store tests (a temporary data
# directory, a free port on 127.0.0.1, stopped and removed at the end), then
# runs every test. Works on a fresh machine with only the Rust toolchain,
# Node.js and apt available. Arguments are passed to `cargo test`
# (`bash scripts/test.sh --test it postgres` runs only those tests).
#
# The cluster speaks TLS with a throwaway CA made here (a server certificate
# for localhost and 127.0.0.1), and accepts plain connections too, except
# for the role `flowc_tls`, which pg_hba.conf admits only over TLS: the TLS
# tests use it to prove that a connection is really encrypted. The role
# `flowc_scram` (password `flowc-test`) logs in with SCRAM over TLS, as on
# managed databases, where the client binds the login to the TLS channel.
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

# The CA and the server's certificate and key, made before initdb so that
# they belong to the cluster's owner with it; the server refuses a key that
# others can read.
tls="$cluster/tls"
mkdir -p "$tls"
# openssl talks on stderr even when all is well: shown only on failure.
quietly() {
  local said
  if ! said="$("$@" 2>&1)"; then
    echo "$said" >&2
    return 1
  fi
}
cat >"$tls/ca.cnf" <<'CNF'
[req]
distinguished_name = subject
prompt = no
x509_extensions = ca
[subject]
CN = flowc test CA
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
CNF
cat >"$tls/server.ext" <<'EXT'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
EXT
quietly openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -days 2 \
  -config "$tls/ca.cnf" -keyout "$tls/ca.key" -out "$tls/ca.crt"
quietly openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -subj "/CN=localhost" \
  -keyout "$tls/server.key" -out "$tls/server.csr"
quietly openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial -days 2 \
  -extfile "$tls/server.ext" -out "$tls/server.crt"
chmod 0600 "$tls/server.key" "$tls/ca.key"

as_cluster_owner "$pg_bin/initdb" -D "$cluster/data" -U flowc --auth=trust -E UTF8 >/dev/null
# First match wins: `flowc_tls` only over TLS, everyone else either way.
cat >"$cluster/data/pg_hba.conf" <<'HBA'
local     all all       trust
hostnossl all flowc_tls 127.0.0.1/32 reject
hostssl   all flowc_tls 127.0.0.1/32 trust
hostssl   all flowc_scram 127.0.0.1/32 scram-sha-256
host      all all       127.0.0.1/32 trust
host      all all       ::1/128      trust
HBA
as_cluster_owner "$pg_bin/pg_ctl" -D "$cluster/data" -l "$cluster/log" -w \
  -o "-p $port -k $cluster -c listen_addresses=127.0.0.1 -c max_connections=200 \
      -c ssl=on -c ssl_cert_file=$tls/server.crt -c ssl_key_file=$tls/server.key" start >/dev/null
"$pg_bin/psql" -h "$cluster" -p "$port" -U flowc -d postgres -q \
  -c "CREATE ROLE flowc_tls LOGIN" -c "CREATE ROLE flowc_scram LOGIN PASSWORD 'flowc-test'" >/dev/null
echo "test: PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (TLS and plain)"
export FLOWC_TEST_POSTGRES="postgres://flowc@127.0.0.1:$port/postgres"
export FLOWC_TEST_POSTGRES_CA="$tls/ca.crt"
# Everything a test needs is installed above: none may skip for want of it.
export FLOWC_TEST_STRICT=1

cargo test "$@"
# The examples' own conversation and workflow tests, as an author runs
# them (offline model, stubbed tools); only on a whole run, not when
# arguments pick some cargo tests.
if [ "$#" -eq 0 ]; then
  cargo run --quiet -- test flows/
fi
