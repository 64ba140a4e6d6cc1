#!/usr/bin/env bash
# Installs Credo (the wallet framework of Bifold and BC Wallet) for the interop tests, into a
# cache folder named after its inputs, so unchanged inputs cost nothing.
#
#   interop/install-credo.sh [0.5.19 | 0.6.3 | 0.7.0]      (0.5.19 when no version is given)
#
# Offline-capable the way ../shared/interop/REAL-PEERS.md describes: install scripts are not
# run (askar's would download its native library from GitHub); the two FFI packages are
# compiled with node-gyp, and askar's native library comes from the PyPI wheel of the same
# version. For 0.6.3 and 0.7.0 the registry here lacks some of Credo's packages: those are
# built from the release source in vendor/ the way Credo's release builds them, packed, and
# installed from the tarballs (see build_from_source below). Prints progress on stderr and
# the install folder as the last line of stdout.
set -euo pipefail

version="${1:-0.5.19}"
interop="$(cd "$(dirname "$0")" && pwd)"
cache="${MEDIATOR_INTEROP_CACHE:-$HOME/.cache/mediator-interop}"
python="$(command -v "${PYTHON:-python3}")"

case "$version" in
  0.5.19) here="$interop/credo" ;;
  0.6.3) here="$interop/credo-0.6" ;;
  0.7.0) here="$interop/credo-0.7" ;;
  *)
    echo "install-credo: unknown version $version (0.5.19, 0.6.3 or 0.7.0)" >&2
    exit 2
    ;;
esac
source="$interop/vendor/credo-ts-src-v$version.tar.gz"
tools="$interop/credo-tools"

# The cache folder's name: 0.5.19 keeps the name it always had (its lockfile's hash); the
# versions built from source also hash the source, the build tools and their settings.
if [ "$version" = 0.5.19 ]; then
  hash="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-12)"
  dest="$cache/credo-$hash"
else
  hash="$(cd "$interop" && { find "${here#"$interop"/}" "${tools#"$interop"/}" -type f \
    | LC_ALL=C sort | xargs cat; cat "$source"; } | sha256sum | cut -c1-12)"
  dest="$cache/credo-$version-$hash"
fi

if [ -f "$dest/.installed" ]; then
  echo "$dest"
  exit 0
fi

command -v node >/dev/null || { echo "install-credo: node (20.19+) is needed" >&2; exit 1; }
command -v npm >/dev/null || { echo "install-credo: npm is needed" >&2; exit 1; }
started=$(date +%s)

# Credo's build tools (tsdown with the typescript and oxc runtime of the release), locked,
# in a cache folder of their own shared by the versions that need them.
install_tools() {
  local hash folder
  hash="$(cat "$tools/package.json" "$tools/package-lock.json" | sha256sum | cut -c1-12)"
  folder="$cache/credo-tools-$hash"
  if [ ! -f "$folder/.installed" ]; then
    echo "install-credo: build tools (tsdown) into $folder" >&2
    rm -rf "$folder"
    mkdir -p "$folder"
    cp "$tools/package.json" "$tools/package-lock.json" "$folder/"
    (cd "$folder" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
    touch "$folder/.installed"
  fi
  tsdown="$folder/node_modules/.bin/tsdown"
}

# Makes each "file:vendor/<tarball>" dependency of the install's package.json: a @credo-ts
# package from the release source (tsdown, package.json rewritten as pnpm publishes it,
# npm pack), anything else from the version's stubs/ folder (npm pack as it is).
build_from_source() {
  local work="$dest/source" name tarball package
  mkdir -p "$work" "$dest/vendor"
  tar -xzf "$source" -C "$work"
  local wanted
  wanted="$(node "$tools/release.mjs" local "$dest/package.json")"
  while read -r name tarball; do
    [ -n "$name" ] || continue
    case "$name" in
      @credo-ts/*)
        echo "install-credo: building $name $version from the release source" >&2
        package="$work/packages/${name#@credo-ts/}"
        (
          cd "$package"
          "$tsdown" --config "$tools/tsdown.config.mjs" --log-level error >&2
          node "$tools/release.mjs" rewrite "$work/pnpm-workspace.yaml" "$version"
          cp "$work/LICENSE" .
        )
        ;;
      *)
        echo "install-credo: packing the stand-in for $name" >&2
        package="$work/stubs/${name##*/}"
        mkdir -p "$work/stubs"
        cp -r "$here/stubs/${name##*/}" "$package"
        ;;
    esac
    (cd "$package" && npm pack --ignore-scripts --pack-destination "$dest/vendor" \
      --loglevel=error >/dev/null)
    [ -f "$dest/$tarball" ] || { echo "install-credo: $name did not pack as $tarball" >&2; exit 1; }
  done <<<"$wanted"
  rm -rf "$work"
  node "$tools/release.mjs" integrity "$dest/package-lock.json"
}

# askar's native library, from the PyPI wheel of the version the wrapper package downloads.
install_askar_library() {
  local wrapper="$1" wheel_version="$2"
  echo "install-credo: askar's native library from the aries-askar $wheel_version wheel" >&2
  "$python" -m pip download --quiet --no-deps --only-binary=:all: -d "$dest/wheels" \
    "aries-askar==$wheel_version" >&2
  mkdir -p "$wrapper/native"
  "$python" - "$dest/wheels" "$wrapper/native" "$wheel_version" <<'PY'
import pathlib, sys, zipfile
wheels, native, version = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
[wheel] = wheels.glob(f"aries_askar-{version}-*.whl")
with zipfile.ZipFile(wheel) as z:
    (native / "libaries_askar.so").write_bytes(z.read("aries_askar/libaries_askar.so"))
PY
  rm -rf "$dest/wheels"
}

rm -rf "$dest"
mkdir -p "$dest"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
if [ "$version" != 0.5.19 ]; then
  install_tools
  build_from_source
fi
cd "$dest"
echo "install-credo: npm install (locked) of Credo $version into $dest (about a minute)" >&2
npm install --ignore-scripts --no-audit --no-fund --loglevel=error >&2
echo "install-credo: compiling the FFI packages" >&2
npm rebuild @2060.io/ffi-napi @2060.io/ref-napi --loglevel=error >&2
if [ "$version" = 0.5.19 ]; then
  install_askar_library "$dest/node_modules/@hyperledger/aries-askar-nodejs" 0.3.2
else
  wrapper="$dest/node_modules/@openwallet-foundation/askar-nodejs"
  binary="$(node -p "require('$wrapper/package.json').binary.version.replace(/^v/, '')")"
  install_askar_library "$wrapper" "$binary"
fi
touch "$dest/.installed"
echo "install-credo: done in $(( $(date +%s) - started )) s" >&2
echo "$dest"
