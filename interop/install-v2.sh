#!/usr/bin/env bash
# Installs a DIDComm v2 wallet library for the interop tests (Veramo 7 or the Hyperledger
# Identus SDK 7, from the npm registry, exactly as interop/v2/<lib>/package-lock.json pins
# them), into a cache folder named after the lockfile, so unchanged inputs cost nothing.
#
#   interop/install-v2.sh veramo|identus
#
# No install scripts are run (--ignore-scripts: neither tree has native code; Identus ships
# its Rust parts as wasm). The drivers (interop/v2/<lib>/agent.mjs) stay in the repository;
# interop/v2/<lib>/node_modules is linked to the install. Prints progress on stderr and the
# install folder as the last line of stdout.
set -euo pipefail

lib="${1:-}"
interop="$(cd "$(dirname "$0")" && pwd)"
cache="${MEDIATOR_INTEROP_CACHE:-$HOME/.cache/mediator-interop}"
case "$lib" in
  veramo | identus) here="$interop/v2/$lib" ;;
  *)
    echo "install-v2: which library? veramo or identus" >&2
    exit 2
    ;;
esac
hash="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-12)"
dest="$cache/v2-$lib-$hash"

if [ ! -f "$dest/.installed" ]; then
  command -v npm >/dev/null || { echo "install-v2: node (20+) and npm are needed" >&2; exit 1; }
  node -e 'if (+process.versions.node.split(".")[0] < 20) process.exit(1)' ||
    { echo "install-v2: node 20 or later is needed" >&2; exit 1; }
  started=$(date +%s)
  echo "install-v2: $lib into $dest" >&2
  rm -rf "$dest.tmp"
  mkdir -p "$dest.tmp"
  cp "$here/package.json" "$here/package-lock.json" "$dest.tmp/"
  (cd "$dest.tmp" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
  rm -rf "$dest"
  mv "$dest.tmp" "$dest"
  touch "$dest/.installed"
  echo "install-v2: $lib installed in $(($(date +%s) - started)) s" >&2
fi
# The drivers import the packages by name, so node looks beside them: the install folder's
# node_modules is linked there (a folder a developer installed there by hand is kept).
if [ ! -e "$here/node_modules" ] || [ -L "$here/node_modules" ]; then
  ln -sfn "$dest/node_modules" "$here/node_modules"
fi
echo "$dest"
