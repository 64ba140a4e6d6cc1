#!/usr/bin/env bash
# Installs ACA-Py (PyPI acapy-agent) for the interop tests into a Python 3.13 virtual
# environment in a cache folder named after the version, so a second run costs nothing.
# Prints progress on stderr and the environment's folder as the last line of stdout.
set -euo pipefail

version="${ACAPY_VERSION:-1.7.0}"
cache="${MEDIATOR_INTEROP_CACHE:-$HOME/.cache/mediator-interop}"
dest="$cache/acapy-$version"

if [ -f "$dest/.installed" ]; then
  echo "$dest"
  exit 0
fi

python=""
# pyenv's shim answers for python3.13 even where it cannot run it: try each for real.
for candidate in "${PYTHON313:-}" "$HOME"/.pyenv/versions/3.13.*/bin/python3.13 python3.13; do
  if [ -n "$candidate" ] && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 13)' \
      >/dev/null 2>&1; then
    python="$(command -v "$candidate")"
    break
  fi
done
if [ -z "$python" ]; then
  echo "install-acapy: ACA-Py $version needs Python 3.13 (set PYTHON313)" >&2
  exit 1
fi
started=$(date +%s)
rm -rf "$dest"
mkdir -p "$cache"
echo "install-acapy: acapy-agent==$version into $dest with $python (about 3 minutes)" >&2
"$python" -m venv "$dest"
"$dest/bin/python" -m pip install --quiet --upgrade pip >&2
"$dest/bin/python" -m pip install --quiet "acapy-agent==$version" >&2
"$dest/bin/aca-py" --version >&2
touch "$dest/.installed"
echo "install-acapy: done in $(( $(date +%s) - started )) s" >&2
echo "$dest"
