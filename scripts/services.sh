#!/usr/bin/env bash
# Start the PostgreSQL and Redis servers the test suite uses, when they are not answering.
# Servers: PostgreSQL on 127.0.0.1:5432 (database "test"), Redis on 127.0.0.1:6379.
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
