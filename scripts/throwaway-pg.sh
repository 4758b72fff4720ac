#!/usr/bin/env bash
# A throwaway PostgreSQL server for the store tests: initdb into a temporary directory, as an
# unprivileged user (the `postgres` account when run as root), listening only on a Unix socket
# in that directory (no port to collide with), trust authentication for that socket alone.
#
#   scripts/throwaway-pg.sh start DIR   prints the URL to give OSCOST_TEST_PG (and --db)
#   scripts/throwaway-pg.sh stop DIR    stops the server and removes DIR
#
# Needs the distribution's PostgreSQL server (Debian: apt-get install postgresql).
set -euo pipefail
cmd=${1:?usage: throwaway-pg.sh start|stop DIR}
dir=${2:?usage: throwaway-pg.sh start|stop DIR}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
[ -n "$bin" ] || bin=$(dirname "$(command -v pg_ctl 2>/dev/null || echo /nonexistent/pg_ctl)")
[ -x "$bin/pg_ctl" ] || { echo "no PostgreSQL server here (pg_ctl); install the postgresql package" >&2; exit 2; }

as_owner() {
  if [ "$(id -u)" = 0 ]; then setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; else "$@"; fi
}

case $cmd in
start)
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  as_owner "$bin/initdb" -D "$dir/data" -U oscost --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c max_connections=100 -c fsync=off" start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
  as_owner "$bin/createdb" -h "$dir" -U oscost oscost_test
  enc=$(printf '%s' "$dir" | sed 's,/,%2F,g')
  echo "postgresql://oscost@$enc/oscost_test"
  ;;
stop)
  [ -d "$dir/data" ] && as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  ;;
*) echo "usage: throwaway-pg.sh start|stop DIR" >&2; exit 2 ;;
esac
