#!/usr/bin/env bash
# Installs Credo 0.5.19 (the wallet framework of Bifold and BC Wallet) for the interop tests,
# into a cache folder named after the lockfile, so an unchanged lockfile costs nothing and a
# changed one gets a fresh folder: ${MEDIATOR_INTEROP_CACHE:-~/.cache/mediator-interop}/credo-<hash>.
#
# Needs node 18+ (20 here), npm, python3 with pip, and only the npm registry and PyPI
# (../shared/interop/REAL-PEERS.md): no package install script runs (askar's would download
# its native library from GitHub); the two FFI packages are compiled with node-gyp against the
# local node headers, and askar's native library comes from the PyPI wheel of the same version.
# The driver (interop/credo/agent.js) stays in the repo and runs with NODE_PATH set to the
# folder's node_modules.
#
# Progress goes to stderr; the last line of stdout is the install folder. A marker written
# last marks a finished install; a half-finished one is redone. Concurrent runs wait on a lock.
set -euo pipefail

here="$(cd "$(dirname "$0")/credo" && pwd)"
cache="${MEDIATOR_INTEROP_CACHE:-$HOME/.cache/mediator-interop}"
hash="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-12)"
dest="$cache/credo-$hash"
marker="$dest/.installed"
python="$(command -v "${PYTHON:-python3}" || true)"

if [ -f "$marker" ]; then
  echo "$dest"
  exit 0
fi

say() { echo "install-credo: $*" >&2; }
command -v node >/dev/null || { say "node (18+) is needed"; exit 1; }
command -v npm >/dev/null || { say "npm is needed"; exit 1; }
[ -n "$python" ] || { say "python3 with pip is needed (for askar's native library)"; exit 1; }
if ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 18 ? 0 : 1)'; then
  say "node $(node --version) is too old: Credo 0.5 needs 18+"
  exit 1
fi

mkdir -p "$cache"
exec 9>"$cache/credo-$hash.lock"
flock 9
if [ -f "$marker" ]; then  # another run finished it while we waited
  echo "$dest"
  exit 0
fi

# node-gyp must not download node's headers (nodejs.org is not reachable): point it at the
# headers that come with node's package, unless npm is already told where they are.
if [ -z "${npm_config_nodedir:-}" ] && [ -z "$(npm config get nodedir 2>/dev/null | grep -v '^undefined$' || true)" ]; then
  prefix="$(dirname "$(dirname "$(node -p 'process.execPath')")")"
  if [ -f "$prefix/include/node/node_api.h" ]; then
    export npm_config_nodedir="$prefix"
  fi
fi

started=$(date +%s)
step() { say "[$(( $(date +%s) - started )) s] $*"; }
rm -rf "$dest"
mkdir -p "$dest"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
cd "$dest"
step "npm ci --ignore-scripts into $dest (about a minute, ~430 MB)"
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2
step "compiling the FFI packages (node-gyp)"
npm rebuild @2060.io/ffi-napi @2060.io/ref-napi --loglevel=error >&2
step "askar's native library from the PyPI wheel aries-askar==0.3.2"
"$python" -m pip download --quiet --no-deps --only-binary=:all: -d "$dest/wheels" \
  aries-askar==0.3.2 >&2
native="$dest/node_modules/@hyperledger/aries-askar-nodejs/native"
mkdir -p "$native"
"$python" - "$dest/wheels" "$native" <<'PY'
import pathlib, sys, zipfile
wheels, native = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
[wheel] = wheels.glob("aries_askar-0.3.2-*.whl")
with zipfile.ZipFile(wheel) as z:
    (native / "libaries_askar.so").write_bytes(z.read("aries_askar/libaries_askar.so"))
PY
rm -rf "$dest/wheels"
step "checking that askar loads"
NODE_PATH="$dest/node_modules" node -e '
  const { ariesAskar } = require("@hyperledger/aries-askar-nodejs")
  console.error("install-credo: askar " + ariesAskar.version())
' >&2
touch "$marker"
step "done"
echo "$dest"
