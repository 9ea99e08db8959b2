#!/usr/bin/env bash
# Teams end-to-end services: Debian's chromium, the Agents Playground and playwright-core (npm,
# in .tools/teams), and a running Playground pointed at the port where the e2e test starts its bot.
#   setup: install (idempotent; quick when done)   start: launch, append to var/test-env   stop: by pid
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
VAR="$ROOT/var/teams-e2e"

case "${1:-}" in
  setup)
    if [ ! -x /usr/bin/chromium ]; then
      if [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
      else
        echo "40-teams: /usr/bin/chromium missing; install Debian's chromium (apt-get install chromium)" >&2
      fi
    fi
    scripts/playground.sh install
    ;;
  start)
    if [ ! -x /usr/bin/chromium ]; then echo "40-teams: no chromium; e2e will not run" >&2; exit 0; fi
    mkdir -p "$VAR"
    bot_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
    PLAYGROUND_VAR="$VAR" PLAYGROUND_CONVERSATION_ID=personal-e2e \
      scripts/playground.sh start "http://127.0.0.1:$bot_port/api/messages"
    {
      echo "TEAMS_PLAYGROUND_URL=$(PLAYGROUND_VAR="$VAR" scripts/playground.sh url)"
      echo "TEAMS_E2E_BOT_PORT=$bot_port"
      echo "TEAMS_PLAYWRIGHT=$ROOT/.tools/teams/node_modules/playwright-core"
      echo "TEAMS_CHROMIUM=/usr/bin/chromium"
    } >> var/test-env
    ;;
  stop)
    PLAYGROUND_VAR="$VAR" scripts/playground.sh stop
    ;;
  *) echo "usage: $0 setup|start|stop" >&2; exit 2 ;;
esac
