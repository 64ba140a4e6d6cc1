#!/usr/bin/env bash
# Installs Credo 0.5.19 (the wallet framework of Bifold and BC Wallet) for the interop tests,
# into a cache folder named after the lockfile, so an unchanged lockfile costs nothing.
#
# Offline-capable the way ../shared/interop/REAL-PEERS.md describes: install scripts are not
# run (askar's would download its native library from GitHub); the two FFI packages are
# compiled with node-gyp, and askar's native library comes from the PyPI wheel of the same
# version. Prints progress on stderr and the install folder as the last line of stdout.
set -euo pipefail

here="$(cd "$(dirname "$0")/credo" && pwd)"
cache="${MEDIATOR_INTEROP_CACHE:-$HOME/.cache/mediator-interop}"
hash="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-12)"
dest="$cache/credo-$hash"
python="$(command -v "${PYTHON:-python3}")"

if [ -f "$dest/.installed" ]; then
  echo "$dest"
  exit 0
fi

command -v node >/dev/null || { echo "install-credo: node (20+) is needed" >&2; exit 1; }
command -v npm >/dev/null || { echo "install-credo: npm is needed" >&2; exit 1; }
started=$(date +%s)
rm -rf "$dest"
mkdir -p "$dest"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
cd "$dest"
echo "install-credo: npm install (locked) into $dest (about a minute)" >&2
npm install --ignore-scripts --no-audit --no-fund --loglevel=error >&2
echo "install-credo: compiling the FFI packages" >&2
npm rebuild @2060.io/ffi-napi @2060.io/ref-napi --loglevel=error >&2
echo "install-credo: askar's native library from the aries-askar 0.3.2 wheel" >&2
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
touch "$dest/.installed"
echo "install-credo: done in $(( $(date +%s) - started )) s" >&2
echo "$dest"
