#!/usr/bin/env bash
# Idempotent installer for the two DIDComm v2 reference peers (Node >= 20, npm registry only, no native builds).
# Each library gets its own folder + node_modules (they pin different did-resolver/multiformats majors).
# Installs run one after another (never in parallel). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"
NPM_FLAGS=(--no-audit --no-fund --ignore-scripts --loglevel=error)

install_one() { # dir, pinned specs...
  local dir=$1; shift
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] || echo "{\"name\":\"$dir-peer\",\"private\":true,\"type\":\"module\"}" > "$dir/package.json"
  # already complete? (every pinned spec present at the pinned version)
  if [ -d "$dir/node_modules" ] && (cd "$dir" && npm ls --depth=0 "${@%@*}" >/dev/null 2>&1); then
    local ok=1
    for spec in "$@"; do
      local name=${spec%@*} ver=${spec##*@}
      [ "$(node -p "require('./$dir/node_modules/$name/package.json').version" 2>/dev/null)" = "$ver" ] || ok=0
    done
    if [ $ok = 1 ]; then echo "[$dir] already installed"; return 0; fi
  fi
  local t0=$SECONDS
  if [ -f "$dir/package-lock.json" ]; then
    (cd "$dir" && npm ci "${NPM_FLAGS[@]}")
  else
    (cd "$dir" && npm install --save-exact "${NPM_FLAGS[@]}" "$@")
  fi
  echo "[$dir] installed in $((SECONDS - t0))s, node_modules $(du -sh "$dir/node_modules" | cut -f1)"
}

node -e 'if (+process.versions.node.split(".")[0] < 20) { console.error("need node >= 20"); process.exit(1) }'

install_one veramo \
  @veramo/core@7.0.1 @veramo/did-comm@7.0.1 @veramo/key-manager@7.0.1 @veramo/kms-local@7.0.1 \
  @veramo/did-manager@7.0.1 @veramo/did-resolver@7.0.1 @veramo/data-store-json@7.0.1 \
  @veramo/did-provider-peer@7.0.1 @veramo/utils@7.0.1 did-resolver@4.1.0

install_one identus \
  @hyperledger/identus-sdk@7.0.0 @trust0/identus-store@2.0.0

# smoke test: both libraries load and can mint a did:peer:2
node mkpeer.mjs veramo >/dev/null
node mkpeer.mjs identus >/dev/null 2>&1
echo "install OK"
