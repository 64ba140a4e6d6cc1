#!/usr/bin/env bash
# Starts our mediator (temp data dir, port $PORT, default 18471), runs the Identus A<->B
# scenarios of e2e.mjs against it, stops the mediator (its process group).
#   ./e2e.sh            all scenarios          ./e2e.sh live poll     only those
# Scenarios: live (WebSocket live mode), poll (Pickup 3.0 delivery-request every 2 s),
#   offline-poll (B writes to A before A fetches, then A polls),
#   offline-live (same, then A goes live: fails while the mediator's live mode does not push
#   what was queued before it; reported, not counted).
# Logs: $OUT (default a temp dir): mediator.log and <scenario>/{A,B}.err. Exit 1 if a counted
# scenario fails.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
PORT=${PORT:-18471}
OUT=${OUT:-$(mktemp -d /tmp/identus-e2e.XXXXXX)}; mkdir -p "$OUT"
scenarios=("$@"); [ ${#scenarios[@]} -eq 0 ] && scenarios=(live poll offline-poll offline-live)
[ -d "$here/node_modules/@hyperledger/identus-sdk" ] || "$here/../install.sh"

data=$(mktemp -d)
( cd "$root" && exec setsid env MEDIATOR_DATA_DIR="$data" MEDIATOR_PORT="$PORT" \
    MEDIATOR_ENDPOINT="http://127.0.0.1:$PORT" MEDIATOR_LOG_LEVEL="${MEDIATOR_LOG_LEVEL:-info}" \
    .venv/bin/python -m mediator serve >"$OUT/mediator.log" 2>&1 ) &
mpid=$!
cleanup() { kill -- -"$mpid" 2>/dev/null; wait "$mpid" 2>/dev/null; rm -rf "$data"; }
trap cleanup EXIT
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$PORT/v2/invitation" >/dev/null && break; sleep 0.5; done
curl -sf "http://127.0.0.1:$PORT/v2/invitation" >/dev/null || { echo "mediator did not start, see $OUT/mediator.log"; exit 2; }

fail=0
for s in "${scenarios[@]}"; do
  case $s in
    live) flags=() ;;
    poll) flags=(--poll --poll-ms 2000) ;;
    offline-poll) flags=(--offline --poll --poll-ms 2000) ;;
    offline-live) flags=(--offline) ;;
    *) echo "unknown scenario $s"; exit 2 ;;
  esac
  mkdir -p "$OUT/$s"
  t=$SECONDS
  E2E_WAIT_MS=${E2E_WAIT_MS:-15000} E2E_LOG_DIR="$OUT/$s" timeout 110 \
    node "$here/e2e.mjs" "http://127.0.0.1:$PORT" "${flags[@]}" >"$OUT/$s/result.json" 2>"$OUT/$s/e2e.log"
  rc=$?
  summary=$(node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));
    const f=(d)=>d?`${d.ok?"ok":"FAIL"} ${d.ms}ms`:"-";
    console.log(`B->A ${f(r.b_to_a)}, A->B ${f(r.a_to_b)}${r.error?", error: "+r.error:""}`)' "$OUT/$s/result.json" 2>/dev/null || echo "no result")
  if [ $rc -eq 0 ]; then verdict=PASS
  elif [ "$s" = offline-live ]; then verdict="EXPECTED FAIL (mediator: live mode does not push the backlog)"
  else verdict=FAIL; fail=1; fi
  echo "$s: $verdict in $((SECONDS - t))s: $summary"
done
echo "logs: $OUT"
exit $fail
