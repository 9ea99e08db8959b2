#!/usr/bin/env bash
# Egress-gate tests: they drive real curl (and pip, which the venv has) through the gate.
# Nothing to start: every test runs its own gate and origin servers on 127.0.0.1.
set -euo pipefail
case "${1:-}" in
  setup)
    if ! command -v curl >/dev/null 2>&1; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null
    fi
    # bubblewrap is installed by scripts/setup; report here, the sandbox tests fail under CI without it
    command -v bwrap >/dev/null 2>&1 || echo "60-gate: bwrap missing: the sandbox cannot be confined" >&2
    ;;
  start|stop) ;;
  *) echo "usage: $0 setup|start|stop" >&2; exit 2 ;;
esac
