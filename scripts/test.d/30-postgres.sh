#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the PostgreSQL store tests, on loopback only.
#   setup:   Debian's postgresql where its binaries are missing and root can install them
#   start:   initdb + start a cluster on a free loopback port, as an unprivileged user (the server
#            refuses root: as root it runs as `postgres`); appends CHAT_APPROVALS_TEST_PG (its URL)
#            and CHAT_APPROVALS_TEST_PG_CTL (this script, for the restart test) to var/test-env
#   restart: stop and start the same cluster on the same port (the tests' "database restarted")
#   stop:    stops it and removes its data
# Without the binaries (and no root to install them) start says so and the PostgreSQL tests skip.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
RUN="$ROOT/var/postgres"

bindir() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
  done
  command -v pg_ctl >/dev/null 2>&1 && { dirname "$(command -v pg_ctl)"; return 0; }
  return 1
}

# Runs a command as the cluster's owner: `postgres` when we are root, else ourselves.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

pg_ctl_() { as_owner "$(bindir)/pg_ctl" -D "$(cat "$RUN/datadir")" "$@"; }

start_cluster() {
  local port
  port=$(cat "$RUN/port")
  pg_ctl_ -w -t 60 -l "$(cat "$RUN/datadir")/server.log" \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='' -c max_connections=200" \
    start >/dev/null
}

case "${1:-}" in
  setup)
    if ! bindir >/dev/null; then
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
      else
        echo "30-postgres: no PostgreSQL binaries and no root to install them (apt-get install postgresql);" \
          "the PostgreSQL tests will skip" >&2
      fi
    fi ;;
  start)
    why=""
    if ! bindir >/dev/null; then
      why="no PostgreSQL binaries here, and no root to install them (apt-get install postgresql)"
    elif [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
      why="running as root with no 'postgres' user to run the server as (the server refuses root)"
    fi
    if [ -n "$why" ]; then  # the tests skip with this reason, under CI=true too
      echo "30-postgres: $why; the PostgreSQL tests will skip" >&2
      mkdir -p var
      printf 'CHAT_APPROVALS_TEST_PG_SKIP="%s"\n' "$why" >>var/test-env
      exit 0
    fi
    mkdir -p "$RUN"
    [ -f "$RUN/datadir" ] && bash "$ROOT/scripts/test.d/30-postgres.sh" stop
    # The data lives under /tmp: the owner must reach it, and the work tree may not be readable to it.
    data=$(mktemp -d /tmp/chat-approvals-pg.XXXXXX)
    [ "$(id -u)" = 0 ] && chown postgres: "$data"
    echo "$data" >"$RUN/datadir"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
    echo "$port" >"$RUN/port"
    as_owner "$(bindir)/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    start_cluster
    mkdir -p var
    {
      echo "CHAT_APPROVALS_TEST_PG=postgresql://postgres@127.0.0.1:$port/postgres"
      echo "CHAT_APPROVALS_TEST_PG_CTL=$ROOT/scripts/test.d/30-postgres.sh"
    } >>var/test-env
    echo "postgres: 127.0.0.1:$port" ;;
  restart)
    pg_ctl_ -w -m fast stop >/dev/null
    start_cluster ;;
  stop-server)  # the database down, its data kept (the tests' outage)
    pg_ctl_ -w -m fast stop >/dev/null ;;
  start-server)
    start_cluster ;;
  stop)
    if [ -f "$RUN/datadir" ]; then
      data=$(cat "$RUN/datadir")
      pg_ctl_ -w -m fast stop >/dev/null 2>&1 || true
      case "$data" in /tmp/chat-approvals-pg.*) rm -rf "$data" ;; esac
      rm -f "$RUN/datadir" "$RUN/port"
    fi ;;
  *) echo "usage: $0 setup|start|restart|stop-server|start-server|stop" >&2; exit 2 ;;
esac
