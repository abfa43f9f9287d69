#!/usr/bin/env bash
# Start the PostgreSQL and Redis servers the test suite uses, when they are not answering.
# Servers: PostgreSQL on 127.0.0.1:5432 (database "test"), Redis on 127.0.0.1:6379, and the
# production topologies of docs/deployment.md (PgBouncer on 6432, Redis Cluster on 7001-7003).
set -euo pipefail

pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

if ! pg_up; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    echo "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  fi
  for _ in $(seq 1 60); do pg_up && break; sleep 0.5; done
  pg_up || { echo "PostgreSQL is not answering on 127.0.0.1:5432" >&2; exit 3; }
fi
if ! redis_up; then
  if command -v redis-server >/dev/null 2>&1; then
    echo "starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
  fi
  for _ in $(seq 1 60); do redis_up && break; sleep 0.5; done
  redis_up || { echo "Redis is not answering on 127.0.0.1:6379" >&2; exit 3; }
fi
# The suite uses the "test" database; create it when missing (trust auth as user postgres).
if ! psql -h 127.0.0.1 -U postgres -d test -Atc 'select 1' >/dev/null 2>&1; then
  psql -h 127.0.0.1 -U postgres -d postgres -c 'CREATE DATABASE test' >/dev/null
fi

# -- production topologies (issue 18): PgBouncer and a Redis Cluster, loopback only ----------------
# PgBouncer in transaction pooling mode on 127.0.0.1:6432 in front of 127.0.0.1:5432, and a
# three-master Redis Cluster on 127.0.0.1:7001-7003. Both are started only when not answering;
# their config and data live under ${TENXGRAPH_RUN_DIR:-/tmp/tenxgraph-services}. Set
# TENXGRAPH_SKIP_TOPOLOGIES=1 to start neither (the topology tests then skip locally, fail in CI).
if [ "${TENXGRAPH_SKIP_TOPOLOGIES:-0}" = "1" ]; then exit 0; fi
RUN_DIR=${TENXGRAPH_RUN_DIR:-/tmp/tenxgraph-services}
mkdir -p "$RUN_DIR"
chmod 755 "$RUN_DIR"

as_service_user() {
  # PgBouncer refuses to run as root: run it as the postgres user when we are root.
  if [ "$(id -u)" = "0" ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
bouncer_up() { pg_isready -h 127.0.0.1 -p 6432 -q 2>/dev/null; }

start_pgbouncer() {
  if ! command -v pgbouncer >/dev/null 2>&1; then
    echo "installing PgBouncer"
    if [ "$(id -u)" = "0" ]; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer) >/dev/null
    else
      (sudo -n apt-get update -qq && sudo -n DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer) >/dev/null
    fi
  fi
  echo "starting PgBouncer (transaction pooling) on 127.0.0.1:6432"
  PGB_DIR="$RUN_DIR/pgbouncer"
  mkdir -p "$PGB_DIR"
  printf '"postgres" ""\n' >"$PGB_DIR/userlist.txt"
  cat >"$PGB_DIR/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=5432

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = 6432
unix_socket_dir =
auth_type = trust
auth_file = $PGB_DIR/userlist.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
ignore_startup_parameters = extra_float_digits,options
logfile = $PGB_DIR/pgbouncer.log
pidfile = $PGB_DIR/pgbouncer.pid
INI
  if [ "$(id -u)" = "0" ]; then chown -R postgres "$PGB_DIR"; fi
  as_service_user pgbouncer -d "$PGB_DIR/pgbouncer.ini"
  for _ in $(seq 1 40); do bouncer_up && break; sleep 0.25; done
  bouncer_up || { echo "PgBouncer is not answering on 127.0.0.1:6432 (see $PGB_DIR/pgbouncer.log)" >&2; return 3; }
}

CLUSTER_PORTS="7001 7002 7003"
node_up() { redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null | grep -q PONG; }
cluster_ok() { redis-cli -h 127.0.0.1 -p 7001 cluster info 2>/dev/null | grep -q 'cluster_state:ok'; }

start_redis_cluster() {
  echo "starting the Redis Cluster on 127.0.0.1:7001-7003"
  fresh=1
  for p in $CLUSTER_PORTS; do node_up "$p" && fresh=0; done
  for p in $CLUSTER_PORTS; do
    d="$RUN_DIR/redis-cluster/$p"
    [ "$fresh" = "1" ] && rm -rf "$d"
    mkdir -p "$d"
    if ! node_up "$p"; then
      redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
        --cluster-config-file "$d/nodes.conf" --cluster-node-timeout 2000 \
        --save "" --appendonly no --daemonize yes --dir "$d" \
        --pidfile "$d/redis.pid" --logfile "$d/redis.log"
    fi
  done
  for p in $CLUSTER_PORTS; do
    for _ in $(seq 1 40); do node_up "$p" && break; sleep 0.25; done
    node_up "$p" || { echo "Redis Cluster node 127.0.0.1:$p is not answering" >&2; return 3; }
  done
  if redis-cli -h 127.0.0.1 -p 7001 cluster info | grep -q 'cluster_slots_assigned:0'; then
    redis-cli --cluster create 127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003 \
      --cluster-replicas 0 --cluster-yes >/dev/null
  fi
  for _ in $(seq 1 40); do cluster_ok && break; sleep 0.25; done
  cluster_ok || { echo "the Redis Cluster on 127.0.0.1:7001-7003 is not ok" >&2; return 3; }
}

# -- HAProxy (issue 27): the load balancer of the server tests (tests/server_lb) ------------------
# Only installed here, from Debian's packages, when missing: each test starts its own HAProxy on
# free loopback ports with a config in a temporary folder, in front of its own server processes.
install_haproxy() {
  command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] && return 0
  echo "installing HAProxy"
  if [ "$(id -u)" = "0" ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy) >/dev/null
  else
    (sudo -n apt-get update -qq && sudo -n DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy) >/dev/null
  fi
}
install_haproxy || echo "warning: HAProxy could not be installed; the load-balancer tests will fail in CI" >&2

# A topology that cannot be started does not stop the suite: the tests needing it fail in CI
# (CI=true) and skip elsewhere, each naming the missing service.
if ! bouncer_up; then
  start_pgbouncer || echo "warning: PgBouncer could not be started; its tests will fail in CI" >&2
fi
if ! cluster_ok; then
  start_redis_cluster || echo "warning: the Redis Cluster could not be started; its tests will fail in CI" >&2
fi
