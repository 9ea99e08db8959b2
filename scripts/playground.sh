#!/usr/bin/env bash
# Microsoft 365 Agents Playground (a local Teams-like client), pointed at the bot, headless-safe.
#   scripts/playground.sh install          npm packages into .tools/teams (idempotent)
#   scripts/playground.sh start [ENDPOINT] start it (default endpoint http://127.0.0.1:3978/api/messages),
#                                          wait until it listens, print its address
#   scripts/playground.sh stop             stop it by the pid it wrote (only the one on PLAYGROUND_PORT)
#   scripts/playground.sh url              print its address
# Env: PLAYGROUND_PORT (default: a free port; scripts/run gives 56150), PLAYGROUND_VAR (default: var/),
# PLAYGROUND_CONVERSATION_ID. With PLAYGROUND_PORT its pid, log and folder are named by the port, so
# two Playgrounds on two ports never share a pid file and `stop` ends only the one on that port.
# Why the env vars below: with no browser it would spawn xdg-open and exit(1) (TEAMSAPPTESTER_BROWSER=none);
# it writes logs into its CWD unless told where; --dt turns telemetry off (no network here).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS="$ROOT/.tools/teams"
VAR=${PLAYGROUND_VAR:-$ROOT/var}
NAME=playground${PLAYGROUND_PORT:+-$PLAYGROUND_PORT}
PIDFILE="$VAR/$NAME.pid"
LOG="$VAR/$NAME.log"
ENDPOINT_FILE="$VAR/$NAME.endpoint"
PLAYGROUND_VERSION=0.2.28
PLAYWRIGHT_VERSION=1.65.1

install() {
  local have
  have=$(node -e "try{const a=require('$TOOLS/node_modules/@microsoft/m365agentsplayground/package.json').version;const b=require('$TOOLS/node_modules/playwright-core/package.json').version;console.log(a+' '+b)}catch(e){console.log('')}")
  if [ "$have" != "$PLAYGROUND_VERSION $PLAYWRIGHT_VERSION" ]; then
    mkdir -p "$TOOLS"
    npm install --prefix "$TOOLS" --no-audit --no-fund --loglevel=error \
      "@microsoft/m365agentsplayground@$PLAYGROUND_VERSION" "playwright-core@$PLAYWRIGHT_VERSION" >/dev/null
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

url() {
  local port
  port=$(grep -oE 'Listening on [0-9]+' "$LOG" 2>/dev/null | tail -1 | grep -oE '[0-9]+$' || true)
  [ -n "$port" ] && echo "http://127.0.0.1:$port/"
}

start() {
  local endpoint=${1:-http://127.0.0.1:3978/api/messages}
  install
  if running; then
    # one left by an earlier run may point at another bot: reuse it only for the same endpoint
    if [ "$(cat "$ENDPOINT_FILE" 2>/dev/null)" = "$endpoint" ]; then
      echo "playground already running (pid $(cat "$PIDFILE")): $(url)"; return 0
    fi
    echo "playground running for another endpoint ($(cat "$ENDPOINT_FILE" 2>/dev/null || echo unknown)); restarting it"
    stop
  fi
  mkdir -p "$VAR/$NAME"
  local port=${PLAYGROUND_PORT:-$(free_port)}
  local extra=()
  [ -n "${PLAYGROUND_CONVERSATION_ID:-}" ] && extra+=(--conversation-id "$PLAYGROUND_CONVERSATION_ID")
  : > "$LOG"
  (
    cd "$VAR/$NAME"
    TEAMSAPPTESTER_BROWSER=none \
    M365_AGENTS_PLAYGROUND_LOGFILE="$VAR/$NAME/internal.log" \
    M365_AGENTS_PLAYGROUND_RECORDING_FILE="$VAR/$NAME/events.log" \
    M365_AGENTS_PLAYGROUND_CONFIG_PATH="$VAR/$NAME/config.yml" \
      exec setsid "$TOOLS/node_modules/.bin/agentsplayground" -e "$endpoint" -c msteams --dt -p "$port" "${extra[@]}"
  ) >>"$LOG" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
  echo "$endpoint" > "$ENDPOINT_FILE"
  for _ in $(seq 1 120); do  # bounded: 60 s
    if [ -n "$(url)" ]; then
      echo "Teams Playground: $(url)  (pointed at $endpoint; pid $(cat "$PIDFILE"))"
      return 0
    fi
    running || break
    sleep 0.5
  done
  echo "playground did not start; see $LOG and $VAR/$NAME/internal.log" >&2
  stop
  return 1
}

stop() {
  if [ -f "$PIDFILE" ]; then
    local pid
    pid=$(cat "$PIDFILE")
    # setsid made it a process-group leader: end the group it started, by its id
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$PIDFILE"
  fi
  rm -f "$ENDPOINT_FILE"
}

case "${1:-}" in
  install) install ;;
  start) shift; start "$@" ;;
  stop) stop ;;
  url) url ;;
  *) echo "usage: $0 install|start [ENDPOINT]|stop|url" >&2; exit 2 ;;
esac
