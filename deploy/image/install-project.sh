#!/bin/bash
# Runs in the build stages of deploy/Containerfile: installs the project's wheel into the venv
# that holds its dependencies, checks that venv (pip check, `mediator --help`), then installs
# the same wheel again under /out, where its files alone are copied into the image.
set -euo pipefail

venv=/opt/mediator
pip=("$venv/bin/pip" --disable-pip-version-check)
"${pip[@]}" install --no-cache-dir --no-index --no-deps "$@"
"${pip[@]}" check
"$venv/bin/mediator" --help >/dev/null
"${pip[@]}" install --no-cache-dir --no-index --no-deps --ignore-installed --root /out "$@"
