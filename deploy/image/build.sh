#!/usr/bin/env bash
# Builds the OCI images without a Docker engine (`make image`): the node, localhost/mediator,
# and the capacity jobs, localhost/mediator-spark, saved as OCI archives in build/images/.
#
#   1. installs podman, buildah, skopeo, mmdebstrap and their helpers from Debian if missing;
#   2. makes the two bases with mmdebstrap from the host's apt mirrors, or reuses them;
#   3. builds the wheels on the host (.venv's pip; versions pinned to what .venv runs),
#      completed with what the image's own Python needs;
#   4. builds both targets of deploy/Containerfile with podman, offline;
#   5. records what went in (Debian packages, Python packages) and saves the archives.
#
# Runs as root (CI does). podman runs with the project's configuration (deploy/image/env.sh):
# storage in build/containers/, nothing in /etc is touched.
#
# Environment: VENV (default .venv), DEBIAN_SUITE (bookworm), BASE_MAX_AGE_DAYS (7: a base
# older than this is made again, for security updates), REBUILD_BASES=1 (make them again now),
# IMAGE_SOURCE (the source URL label; default: git's origin, else pyproject's URLs),
# VERBOSE=1 (show the tools' output instead of keeping it in build/images/logs/).
# shellcheck source-path=SCRIPTDIR
set -Eeuo pipefail
export LC_ALL=C

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
SUITE="${DEBIAN_SUITE:-bookworm}"
BASE_MAX_AGE_DAYS="${BASE_MAX_AGE_DAYS:-7}"
REBUILD_BASES="${REBUILD_BASES:-0}"
VERBOSE="${VERBOSE:-0}"

BASE_PACKAGES="python3,python3-venv,ca-certificates"
SPARK_BASE_PACKAGES="$BASE_PACKAGES,openjdk-17-jre-headless"
HOST_PACKAGES=(podman buildah skopeo runc conmon catatonit netavark aardvark-dns uidmap mmdebstrap)
# mmdebstrap's options, part of each base's cache key: merged /usr without the usrmerge
# package (and the perl it pulls in), no manuals, documentation or translations (the
# copyright files stay), and a man1 folder for update-alternatives (openjdk's postinst).
# shellcheck disable=SC2016 # "$1" is the hook's argument, expanded by mmdebstrap
MMDEBSTRAP_OPTIONS=(
    --variant=minbase
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
    --setup-hook='mkdir -p "$1/usr/share/man/man1"'
    --dpkgopt='path-exclude=/usr/share/man/*'
    --dpkgopt='path-exclude=/usr/share/doc/*'
    --dpkgopt='path-include=/usr/share/doc/*/copyright'
    --dpkgopt='path-exclude=/usr/share/locale/*'
    --dpkgopt='path-exclude=/usr/share/info/*'
)

STEP=0
STEPS=6
STEP_NAME="start"
STARTED=$EPOCHREALTIME

elapsed() { # tenths of seconds since $1 (an EPOCHREALTIME), shown as seconds
    local tenths=$(( (${EPOCHREALTIME/./} - ${1/./}) / 100000 ))
    printf '%d.%d' $((tenths / 10)) $((tenths % 10))
}

step() {
    STEP=$((STEP + 1))
    STEP_NAME="$1"
    printf '==> [%d/%d] %s\n' "$STEP" "$STEPS" "$STEP_NAME"
    STEP_STARTED=$EPOCHREALTIME
}

step_done() {
    printf '    %s (%s s)\n' "${1:-done}" "$(elapsed "$STEP_STARTED")"
}

die() {
    printf 'build.sh: error: %s\n' "$*" >&2
    exit 1
}

on_error() {
    printf 'build.sh: error: step %d (%s) failed at line %s: %s\n' \
        "$STEP" "$STEP_NAME" "$1" "$2" >&2
}
trap 'on_error "$LINENO" "$BASH_COMMAND"' ERR

# Runs a tool with its output in build/images/logs/NAME.log (shown as it comes with
# VERBOSE=1); on failure shows the end of that log.
quietly() {
    local name="$1" log
    shift
    log="$LOG_DIR/$name.log"
    if [[ "$VERBOSE" == 1 ]]; then
        if "$@" 2>&1 | tee "$log"; then return 0; fi
    elif "$@" >"$log" 2>&1; then
        return 0
    fi
    printf 'build.sh: %s failed; the end of %s:\n' "$1" "$log" >&2
    tail -n 40 "$log" | sed 's/^/    /' >&2
    trap - ERR
    die "step $STEP ($STEP_NAME) failed"
}

# ---------------------------------------------------------------- host tools

install_tools() {
    step "host tools: ${HOST_PACKAGES[*]}"
    command -v dpkg-query >/dev/null || die "this script needs a Debian host (no dpkg-query)"
    local missing=() pkg
    for pkg in "${HOST_PACKAGES[@]}"; do
        if [[ "$(dpkg-query -W -f '${db:Status-Status}' "$pkg" 2>/dev/null)" != installed ]]; then
            missing+=("$pkg")
        fi
    done
    if ((${#missing[@]} == 0)); then
        step_done "all installed"
        return
    fi
    [[ $EUID -eq 0 ]] || die "missing ${missing[*]}: run as root, or apt-get install them"
    printf '    installing %s\n' "${missing[*]}"
    quietly apt-get-update apt-get update -q
    DEBIAN_FRONTEND=noninteractive quietly apt-get-install \
        apt-get install -y -q --no-install-recommends "${missing[@]}"
    step_done "installed"
}

# ---------------------------------------------------------------- the package and its wheels

project_metadata() {
    [[ -x "$VENV/bin/python" ]] || die "no $VENV/bin/python: run \`make install-spark\` first"
    local meta
    meta="$("$VENV/bin/python" - "$ROOT/pyproject.toml" <<'PY'
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
lic = project.get("license", {})
urls = {k.lower(): v for k, v in project.get("urls", {}).items()}
source = next((urls[k] for k in ("source", "repository", "homepage") if k in urls), "")
for value in (
    project["name"],
    project["version"],
    project.get("description", ""),
    lic.get("text", "") if isinstance(lic, dict) else lic,
    source,
):
    print(value.replace("\n", " "))
PY
)"
    mapfile -t META <<<"$meta"
    NAME="${META[0]}"
    VERSION="${META[1]}"
    DESCRIPTION="${META[2]:-}"
    LICENSES="${META[3]:-NOASSERTION}"
    SOURCE="${IMAGE_SOURCE:-$(git -C "$ROOT" config --get remote.origin.url 2>/dev/null || true)}"
    SOURCE="${SOURCE:-${META[4]:-}}"
    if [[ -z "$SOURCE" ]]; then
        SOURCE=unknown
        printf 'build.sh: warning: no source URL (no git origin, no [project.urls]); set IMAGE_SOURCE\n' >&2
    fi
    REVISION="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
    # One time for the wheel's files and the images' `created` label: the commit's when the
    # package is as committed, else its newest file's. A build with nothing new then
    # reuses every layer, and the images keep their ids.
    local package=(pyproject.toml README.md mediator workers spark)
    if [[ "$REVISION" == unknown ]]; then
        EPOCH="$(date +%s)"
    elif [[ -n "$(git -C "$ROOT" status --porcelain -- "${package[@]}")" ]]; then
        printf 'build.sh: warning: uncommitted changes in the package: the images hold them, the revision label says %s\n' "$REVISION" >&2
        EPOCH="$(git -C "$ROOT" ls-files -z --cached --others --exclude-standard -- "${package[@]}" \
            | (cd "$ROOT" || exit; xargs -0 stat -c %Y 2>/dev/null; true) | sort -n | tail -n 1)"
    else
        EPOCH="$(git -C "$ROOT" log -1 --format=%ct)"
    fi
    EPOCH="${EPOCH:-$(date +%s)}"
    CREATED="$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
}

build_wheels() {
    step "wheels of $NAME $VERSION and its dependencies (host pip, pinned to $VENV)"
    local src wheels="$CONTEXT/wheels" project_wheel paths=() f stamp
    rm -rf "$CONTEXT/image" "$wheels/project"
    mkdir -p "$wheels/project" "$CONTEXT/image"
    cp "$ROOT/deploy/image/install-project.sh" "$ROOT/deploy/image/spark-defaults.conf" "$CONTEXT/image/"

    # The package from a clean copy of its files (what git tracks or would), so setuptools
    # leaves no build/lib in the checkout and carries no stale module into the wheel.
    src="$(mktemp -d)"
    # shellcheck disable=SC2064 # expand now: the folder of this run
    trap "rm -rf '$src'" EXIT
    if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
        while IFS= read -r -d '' f; do
            [[ -e "$ROOT/$f" ]] && paths+=("$f")
        done < <(git -C "$ROOT" ls-files -z --cached --others --exclude-standard -- \
            pyproject.toml README.md 'LICENSE*' mediator workers spark)
    else
        for f in pyproject.toml README.md mediator workers spark; do paths+=("$f"); done
    fi
    tar -C "$ROOT" -cf - --exclude=__pycache__ "${paths[@]}" | tar -C "$src" -xf -

    # The versions .venv runs (what `make test` tested) pin the images' packages.
    "$VENV/bin/pip" freeze --exclude-editable --disable-pip-version-check 2>/dev/null \
        | grep -v -e ' @ ' -e '^-e ' -e "^${NAME}==" >"$CONTEXT/constraints.txt" || true

    # Reproducible wheel (same bytes for the same files): the image layers stay cached.
    SOURCE_DATE_EPOCH="$EPOCH" quietly pip-wheel-project \
        "$VENV/bin/pip" wheel --no-deps --disable-pip-version-check --wheel-dir "$wheels/project" "$src"
    project_wheel="$(echo "$wheels"/project/*.whl)"
    [[ -f "$project_wheel" ]] || die "no wheel of the project in $wheels/project"

    # The dependencies' wheels are kept while the pins, the package's requirements and the
    # base (its Python) are those they were made for.
    stamp="$({
        cat "$CONTEXT/constraints.txt"
        "$VENV/bin/python" - "$project_wheel" <<'PY'
import sys
import zipfile

with zipfile.ZipFile(sys.argv[1]) as wheel:
    meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    lines = wheel.read(meta).decode().splitlines()
print("\n".join(line for line in lines if line.startswith(("Requires-Dist:", "Provides-Extra:"))))
PY
        echo "$NODE_BASE"
    } | sha256sum | cut -c1-16)"
    if [[ -f "$wheels/stamp" && "$(<"$wheels/stamp")" == "$stamp" ]]; then
        step_done "dependencies unchanged, $(find "$wheels/node" "$wheels/spark" -name '*.whl' | wc -l) wheels kept"
        return
    fi
    rm -rf "$wheels/node" "$wheels/spark" "$wheels/stamp"
    mkdir -p "$wheels/node" "$wheels/spark"
    quietly pip-wheel-node "$VENV/bin/pip" wheel --disable-pip-version-check \
        -c "$CONTEXT/constraints.txt" --find-links "$wheels/project" --wheel-dir "$wheels/node" \
        "$project_wheel"
    quietly pip-wheel-spark "$VENV/bin/pip" wheel --disable-pip-version-check \
        -c "$CONTEXT/constraints.txt" --find-links "$wheels/project" --wheel-dir "$wheels/spark" \
        "${project_wheel}[spark]"
    # wheels/spark keeps only what the node's wheels lack; neither holds the project.
    rm -f "$wheels/node/$(basename "$project_wheel")" "$wheels/spark/$(basename "$project_wheel")"
    for f in "$wheels"/node/*.whl; do rm -f "$wheels/spark/$(basename "$f")"; done
    complete_wheels node "$NAME==$VERSION"
    complete_wheels spark "${NAME}[spark]==$VERSION"
    printf '%s\n' "$stamp" >"$wheels/stamp"
    step_done "$(find "$wheels/node" -name '*.whl' | wc -l) node wheels, $(find "$wheels/spark" -name '*.whl' | wc -l) more for spark, $(du -sh "$wheels" | cut -f1)"
}

# The host's Python is not the image's (3.11.7 and 3.11.2 here): a dependency behind an
# environment marker (redis needs async-timeout below 3.11.3) may be missing from wheels the
# host resolved. The base's own pip resolves offline against the wheels, and each
# requirement it cannot find is built on the host; until nothing is missing.
complete_wheels() { # set (node|spark), requirement
    local set="$1" requirement="$2" wheels="$CONTEXT/wheels" out missing round
    for round in 1 2 3 4 5 6 7 8; do
        # shellcheck disable=SC2016 # expanded by the container's shell
        if out="$(podman run --rm --network=none --read-only --tmpfs /tmp \
            -v "$wheels:/wheels:ro" "$NODE_BASE" sh -c \
            'python3 -m venv /tmp/venv && /tmp/venv/bin/pip install --dry-run --no-index \
                --disable-pip-version-check --find-links /wheels/node \
                --find-links /wheels/spark --find-links /wheels/project "$1"' \
            sh "$requirement" 2>&1)"; then
            return 0
        fi
        missing="$(sed -n 's/^ERROR: No matching distribution found for \([^;]*\).*/\1/p' <<<"$out")"
        if [[ -z "$missing" ]]; then
            printf '%s\n' "$out" | tail -n 20 >&2
            die "pip in $NODE_BASE cannot install $requirement from the wheels"
        fi
        printf '    the image'"'"'s Python also needs %s (round %d)\n' "$missing" "$round"
        quietly "pip-wheel-$set-extra" "$VENV/bin/pip" wheel --no-deps --disable-pip-version-check \
            -c "$CONTEXT/constraints.txt" --wheel-dir "$wheels/$set" "$missing"
    done
    die "the wheels for $requirement are still incomplete after $round rounds"
}

# ---------------------------------------------------------------- the bases

# The host's apt sources for the suite (sources.list, sources.list.d/*.list and deb822
# *.sources, as apt itself reads them), one "deb URI SUITE COMPONENTS" line each.
mirror_lines() {
    # shellcheck disable=SC2016 # $(...) are apt's fields, not the shell's
    apt-get indextargets --no-release-info --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' \
        'Created-By: Packages' 2>/dev/null \
        | awk -v suite="$SUITE" '
            $2 ~ ("^" suite "(-updates|-security)?$") {
                key = $1 " " $2
                if (!(key in comps)) { order[++n] = key; comps[key] = $3 }
                else if (index(" " comps[key] " ", " " $3 " ") == 0) comps[key] = comps[key] " " $3
            }
            END { for (i = 1; i <= n; i++) print "deb " order[i] " " comps[order[i]] }'
}

# apt options of the host that its mirrors may need (a proxy, an old snapshot's dates).
apt_options() {
    local name value
    for name in Acquire::http::Proxy Acquire::https::Proxy Acquire::Check-Valid-Until Acquire::Check-Date; do
        value="$(apt-config dump "$name" | sed -n "s/^$name \"\(.*\)\";\$/\1/p" | head -n 1)"
        [[ -n "$value" ]] && printf -- '--aptopt=%s "%s"\n' "$name" "$value"
    done
    return 0
}

# make_base NAME PACKAGES: sets BASE_REF and BASE_PACKAGES_FILE.
make_base() {
    local name="$1" packages="$2" key ref created age list tar opts=()
    key="$(printf '%s\n' "$SUITE" "$packages" "${MMDEBSTRAP_OPTIONS[@]}" "${MIRRORS[@]}" \
        "$(mmdebstrap --version)" | sha256sum | cut -c1-12)"
    ref="localhost/$name:$SUITE-$key"
    list="$BASES_DIR/$name-$SUITE-$key.packages.txt"
    BASE_REF="$ref"
    BASE_PACKAGES_FILE="$list"
    if [[ "$REBUILD_BASES" != 1 && -s "$list" ]] && podman image exists "$ref"; then
        created="$(podman image inspect --format '{{.Created.Unix}}' "$ref")"
        age=$(( ($(date +%s) - created) / 86400 ))
        if ((age < BASE_MAX_AGE_DAYS)); then
            printf '    %s: cached (%d days old, packages unchanged)\n' "$ref" "$age"
            return
        fi
        printf '    %s: %d days old, made again for updates\n' "$ref" "$age"
    fi
    mapfile -t opts < <(apt_options)
    tar="$BASES_DIR/$name.tar"
    quietly "mmdebstrap-$name" mmdebstrap "${MMDEBSTRAP_OPTIONS[@]}" "${opts[@]}" \
        --include="$packages" \
        --customize-hook="dpkg-query --admindir \"\$1/var/lib/dpkg\" -W -f '\${binary:Package}\t\${Version}\n' > '$list.part'" \
        "$SUITE" "$tar" "${MIRRORS[@]}"
    mv "$list.part" "$list"
    quietly "import-$name" podman import \
    --change 'ENV LANG=C.UTF-8' "$tar" "$ref"
    rm -f "$tar"
    # Older bases of this name lose their tag (layers still used by images stay).
    podman images --format '{{.Repository}}:{{.Tag}}' --filter "reference=localhost/$name" \
        | grep -v -x -F "$ref" | xargs -r podman untag >/dev/null 2>&1 || true
    printf '    %s: made, %s Debian packages (%s)\n' "$ref" "$(wc -l <"$list")" \
        "$(podman image inspect --format '{{.Size}}' "$ref" | numfmt --to=iec)"
}

make_bases() {
    step "bases: Debian $SUITE minbase made by mmdebstrap (cached while unchanged)"
    [[ $EUID -eq 0 ]] || die "mmdebstrap and podman's overlay storage here need root"
    mapfile -t MIRRORS < <(mirror_lines)
    ((${#MIRRORS[@]} > 0)) || die "no apt source for $SUITE in /etc/apt/sources.list{,.d/*}: set DEBIAN_SUITE or add one"
    printf '    mirror: %s\n' "${MIRRORS[@]}"
    mkdir -p "$BASES_DIR"
    make_base mediator-base "$BASE_PACKAGES"
    NODE_BASE="$BASE_REF"
    NODE_BASE_PACKAGES="$BASE_PACKAGES_FILE"
    make_base mediator-spark-base "$SPARK_BASE_PACKAGES"
    SPARK_BASE="$BASE_REF"
    SPARK_BASE_PACKAGES="$BASE_PACKAGES_FILE"
    step_done
}

# ---------------------------------------------------------------- the images

build_target() { # target image base-ref
    local target="$1" image="$2" base="$3" digest
    digest="$(podman image inspect --format '{{.Digest}}' "$base")"
    quietly "build-$target" podman build \
        --pull=never --network=none --layers \
        --file "$ROOT/deploy/Containerfile" --target "$target" \
        --build-arg "BASE_IMAGE=$NODE_BASE" \
        --build-arg "SPARK_BASE_IMAGE=$SPARK_BASE" \
        --build-arg "BASE_DIGEST=$digest" \
        --build-arg "VERSION=$VERSION" \
        --build-arg "REVISION=$REVISION" \
        --build-arg "CREATED=$CREATED" \
        --build-arg "SOURCE=$SOURCE" \
        --build-arg "LICENSES=$LICENSES" \
        --build-arg "DESCRIPTION=$DESCRIPTION" \
        --tag "$image" \
        "$CONTEXT"
}

build_images() {
    step "image $NODE_IMAGE (target node)"
    build_target node "$NODE_IMAGE" "$NODE_BASE"
    step_done "$(podman image inspect --format '{{.Size}}' "$NODE_IMAGE" | numfmt --to=iec)"
    step "image $SPARK_IMAGE (target spark)"
    build_target spark "$SPARK_IMAGE" "$SPARK_BASE"
    step_done "$(podman image inspect --format '{{.Size}}' "$SPARK_IMAGE" | numfmt --to=iec)"
}

# ---------------------------------------------------------------- records and archives

python_packages() { # image -> "name==version" lines of its venv
    podman run --rm --network=none --read-only --entrypoint /opt/mediator/bin/python "$1" -c '
import importlib.metadata as m
print("\n".join(sorted(f"{d.name}=={d.version}" for d in m.distributions())))'
}

save_images() {
    step "records and OCI archives in ${IMAGES_DIR#"$ROOT"/}"
    local image name file id
    cp "$NODE_BASE_PACKAGES" "$IMAGES_DIR/mediator-$VERSION.packages.txt"
    cp "$SPARK_BASE_PACKAGES" "$IMAGES_DIR/mediator-spark-$VERSION.packages.txt"
    for image in "$NODE_IMAGE" "$SPARK_IMAGE"; do
        name="$(basename "${image%%:*}")-$VERSION"
        file="$IMAGES_DIR/$name.oci.tar"
        id="$(podman image inspect --format '{{.Id}}' "$image")"
        # An archive of this very image is kept: saving the same bytes again takes seconds.
        if [[ -s "$file" && -s "$IMAGES_DIR/$name.requirements.txt" \
            && "$(cat "$file.image-id" 2>/dev/null)" == "$id" ]]; then
            printf '    %s (%s, unchanged)\n' "${file#"$ROOT"/}" "$(du -h "$file" | cut -f1)"
            continue
        fi
        rm -f "$file" "$file.image-id"
        python_packages "$image" >"$IMAGES_DIR/$name.requirements.txt"
        quietly "save-$name" podman save --format oci-archive --output "$file" "$image"
        printf '%s\n' "$id" >"$file.image-id"
        printf '    %s (%s)\n' "${file#"$ROOT"/}" "$(du -h "$file" | cut -f1)"
    done
    step_done
}

summary() {
    cat <<EOF
==> built in $(elapsed "$STARTED") s
    $NODE_IMAGE        $(podman image inspect --format '{{.Size}}' "$NODE_IMAGE" | numfmt --to=iec)
    $SPARK_IMAGE  $(podman image inspect --format '{{.Size}}' "$SPARK_IMAGE" | numfmt --to=iec)

Run a node (its own embedded server, data in the volume mediator-data):
    . deploy/image/env.sh
    podman run --rm --network host --read-only --tmpfs /tmp -v mediator-data:/data \\
        --cap-drop ALL --security-opt no-new-privileges $NODE_IMAGE
  or against a Redis: add -e MEDIATOR_REDIS_URL=redis://HOST:6379/0 (and -e MEDIATOR_PORT=...).
A capacity snapshot:
    podman run --rm --network host --read-only --tmpfs /tmp -v mediator-history:/data \\
        -e MEDIATOR_REDIS_URL=redis://HOST:6379/0 $SPARK_IMAGE capacity snapshot --out /data/history
Elsewhere: skopeo copy oci-archive:build/images/mediator-$VERSION.oci.tar docker://REGISTRY/mediator:$VERSION
EOF
}

main() {
    # shellcheck source=env.sh
    . "$ROOT/deploy/image/env.sh"
    CONTEXT="$ROOT/build/image-context"
    IMAGES_DIR="$MEDIATOR_IMAGES_DIR"
    BASES_DIR="$MEDIATOR_CONTAINERS_DIR/bases"
    LOG_DIR="$IMAGES_DIR/logs"
    mkdir -p "$LOG_DIR"
    install_tools
    project_metadata
    NODE_IMAGE="localhost/mediator:$VERSION"
    SPARK_IMAGE="localhost/mediator-spark:$VERSION"
    make_bases
    build_wheels
    build_images
    save_images
    summary
}

main "$@"
