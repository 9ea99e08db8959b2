#!/usr/bin/env bash
# The AWS emulators for the DynamoDB/S3 store tests, on loopback only.
#   setup: dynalite (npm, under .tools/dynalite); moto[server] comes with the test extra
#   start: dynalite and a request-serialised moto on free ports; appends their URLs (and dummy
#          AWS credentials) to var/test-env; pids in var/emulators/
#   stop:  kills them by pid
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN=var/emulators
PY=.venv/bin/python
DYNALITE_VERSION=4.0.0

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_port() {
  "$PY" - "$1" "$2" <<'PYEOF'
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
deadline = time.time() + 30
while time.time() < deadline:
    try:
        socket.create_connection((host, port), 0.2).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(f"{host}:{port} did not open within 30 s")
PYEOF
}

case "${1:-}" in
  setup)
    if [ ! -f .tools/dynalite/node_modules/dynalite/cli.js ] ||
       ! grep -q "\"version\": \"$DYNALITE_VERSION\"" .tools/dynalite/node_modules/dynalite/package.json; then
      mkdir -p .tools/dynalite
      [ -f .tools/dynalite/package.json ] || (cd .tools/dynalite && npm init -y >/dev/null)
      npm install --prefix .tools/dynalite --no-audit --no-fund -q "dynalite@$DYNALITE_VERSION"
    fi
    "$PY" -c 'import moto.server' ;;  # installed by scripts/setup (the test extra)
  start)
    mkdir -p "$RUN"
    dport=$(free_port); mport=$(free_port)
    # node directly, not npx: killing an npx pid leaves its node child listening
    node .tools/dynalite/node_modules/dynalite/cli.js --host 127.0.0.1 --port "$dport" \
      --createTableMs 0 --deleteTableMs 0 --updateTableMs 0 >"$RUN/dynalite.log" 2>&1 &
    echo $! >"$RUN/dynalite.pid"
    "$PY" scripts/moto_locked.py 127.0.0.1 "$mport" >"$RUN/moto.log" 2>&1 &
    echo $! >"$RUN/moto.pid"
    wait_port 127.0.0.1 "$dport"
    wait_port 127.0.0.1 "$mport"
    mkdir -p var
    {
      echo "CHAT_APPROVALS_TEST_DYNALITE=http://127.0.0.1:$dport"
      echo "CHAT_APPROVALS_TEST_MOTO=http://127.0.0.1:$mport"
      echo "AWS_ACCESS_KEY_ID=testing"
      echo "AWS_SECRET_ACCESS_KEY=testing"
      echo "AWS_DEFAULT_REGION=us-east-1"
    } >>var/test-env
    echo "emulators: dynalite :$dport, moto :$mport" ;;
  stop)
    for n in dynalite moto; do
      if [ -f "$RUN/$n.pid" ]; then
        kill "$(cat "$RUN/$n.pid")" 2>/dev/null || true
        rm -f "$RUN/$n.pid"
      fi
    done ;;
  *) echo "usage: $0 setup|start|stop" >&2; exit 2 ;;
esac
