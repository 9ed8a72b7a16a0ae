#!/bin/bash
# A throwaway PostgreSQL server for the store tests: `start DIR PORT` initialises a cluster in
# DIR (C locale, UTF-8, trust auth) and starts it listening only on a Unix socket in DIR;
# `stop DIR PORT` stops it and removes DIR. PostgreSQL refuses to run as root, so as root the
# server runs as the `postgres` user. Used as a CTest fixture (tests/CMakeLists.txt).
set -euo pipefail
cmd=${1:?start|stop} dir=${2:?DIR} port=${3:?PORT}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bin/pg_ctl" ] || { echo "pg_server: no PostgreSQL server installed (postgresql-15)" >&2; exit 1; }
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
stop() {
  if [ -f "$dir/data/postmaster.pid" ]; then as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null || true; fi
}
case $cmd in
  start)
    stop
    rm -rf "$dir"
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres --locale=C -E UTF8 >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-k $dir -p $port -c listen_addresses='' -c max_connections=300 -c fsync=off" start >/dev/null ||
      { cat "$dir/server.log" >&2; exit 1; }
    echo "pg_server: running, socket $dir/.s.PGSQL.$port"
    ;;
  stop)
    stop
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|stop DIR PORT" >&2; exit 2 ;;
esac
