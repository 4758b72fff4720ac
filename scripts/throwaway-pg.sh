#!/usr/bin/env bash
# A throwaway PostgreSQL server for the store tests: initdb into a temporary directory, as an
# unprivileged user (the `postgres` account when run as root), listening on a Unix socket in
# that directory with trust authentication. When openssl is there it also listens on
# localhost, TLS only (hostssl: a plain TCP connection is refused), with a certificate signed
# by a throwaway CA named for localhost; there the role `oscost` is trusted and the role
# `pwuser` needs its password, `pw-secret` (for the PGPASSWORD and ~/.pgpass tests).
#
#   scripts/throwaway-pg.sh start DIR   prints the URL to give OSCOST_TEST_PG (and --db); with
#                                       TLS, DIR/tls-url holds the TLS URL and DIR/ca.crt the CA
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
  listen="''"
  tls_opts=""
  port=5432
  if command -v openssl >/dev/null 2>&1; then
    # A port nothing listens on (the socket's name uses it too).
    for try in $(seq 20); do
      port=$(( 20000 + (RANDOM % 20000) ))
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
    done
    (
      cd "$dir"
      openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=oscost throwaway CA" \
        -keyout ca.key -out ca.crt >/dev/null 2>&1
      openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr >/dev/null 2>&1
      printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' > ext.cnf
      openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
        -extfile ext.cnf -out server.crt >/dev/null 2>&1
      chmod 600 server.key ca.key
      [ "$(id -u)" = 0 ] && chown postgres: server.key server.crt ca.crt
      true
    )
    if [ -s "$dir/server.crt" ]; then
      listen="'localhost'"
      tls_opts="-c ssl=on -c ssl_cert_file='$dir/server.crt' -c ssl_key_file='$dir/server.key'"
      {
        echo "local all all trust"
        echo "hostssl all pwuser localhost scram-sha-256"
        echo "hostssl all all localhost trust"
      } > "$dir/data/pg_hba.conf"
      [ "$(id -u)" = 0 ] && chown postgres: "$dir/data/pg_hba.conf"
    fi
  fi
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=$listen -p $port -c unix_socket_directories='$dir' -c max_connections=100 -c fsync=off $tls_opts" start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
  as_owner "$bin/createdb" -h "$dir" -p "$port" -U oscost oscost_test
  if [ -n "$tls_opts" ]; then
    as_owner "$bin/psql" -q -h "$dir" -p "$port" -U oscost -d oscost_test \
      -c "CREATE ROLE pwuser LOGIN PASSWORD 'pw-secret' CREATEDB" >/dev/null
    echo "postgresql://oscost@localhost:$port/oscost_test" > "$dir/tls-url"
  fi
  enc=$(printf '%s' "$dir" | sed 's,/,%2F,g')
  echo "postgresql://oscost@$enc:$port/oscost_test"
  ;;
stop)
  [ -d "$dir/data" ] && as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  ;;
*) echo "usage: throwaway-pg.sh start|stop DIR" >&2; exit 2 ;;
esac
