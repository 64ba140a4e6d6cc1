#!/usr/bin/env bash
# Start our mediator on a fresh data dir, run e2e.mjs (two real Veramo 7 agents A and B mediated by
# it, B -> A and A -> B), stop the mediator. Exit code: e2e.mjs's.
#   ./run-e2e.sh [port]            (default 18480; e2e.mjs's ROUTING/MEDIATION/RETURN_ROUTE/PACKING/NORMALISE apply)
# The mediator's log (JSON lines) is left in $WORK/mediator.log, the agents' stderr in $WORK/agents.log.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
port="${1:-18480}"
WORK="${WORK:-$(mktemp -d)}"
[ -d "$here/node_modules/@veramo/did-comm" ] || "$here/../install.sh"

data="$(mktemp -d)"
( cd "$repo" && MEDIATOR_DATA_DIR="$data" MEDIATOR_PORT="$port" MEDIATOR_ENDPOINT="http://127.0.0.1:$port" \
    MEDIATOR_LOG_LEVEL="${MEDIATOR_LOG_LEVEL:-info}" \
    exec setsid "$repo/.venv/bin/python" -m mediator serve >"$WORK/mediator.log" 2>&1 ) &
pid=$!
cleanup() { kill -- -"$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data"; }
trap cleanup EXIT

for _ in $(seq 1 60); do
  curl -sf "http://127.0.0.1:$port/v2/invitation" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -sf "http://127.0.0.1:$port/v2/invitation" >/dev/null || { echo "mediator did not start (see $WORK/mediator.log)" >&2; exit 3; }

set +e
timeout 115 node "$here/e2e.mjs" "http://127.0.0.1:$port" 2>"$WORK/agents.log"
rc=$?
set -e
echo "logs: $WORK" >&2
exit $rc
