# shellcheck shell=bash
# Source this file to run podman, buildah and skopeo with the project's own configuration:
#
#     . deploy/image/env.sh && podman images
#
# It writes build/containers/{containers,storage}.conf from the templates next to it (the
# host quirks' fixes, storage under build/containers/) and exports CONTAINERS_CONF and
# CONTAINERS_STORAGE_CONF. Nothing in /etc is read or changed. It sets no shell options,
# since it runs inside the caller's shell.

MEDIATOR_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MEDIATOR_CONTAINERS_DIR="${MEDIATOR_CONTAINERS_DIR:-$MEDIATOR_ROOT/build/containers}"
MEDIATOR_IMAGES_DIR="${MEDIATOR_IMAGES_DIR:-$MEDIATOR_ROOT/build/images}"

_mediator_render() { # template, output, then KEY=VALUE pairs for @KEY@
    local template="$1" out="$2" text pair
    shift 2
    text="$(<"$template")"
    for pair in "$@"; do
        text="${text//@${pair%%=*}@/${pair#*=}}"
    done
    # Rewritten only when it changes, so its time stamp means something.
    if [[ ! -f "$out" || "$(<"$out")" != "$text" ]]; then
        printf '%s\n' "$text" >"$out"
    fi
}

mkdir -p "$MEDIATOR_CONTAINERS_DIR"/{storage,run,tmp} "$MEDIATOR_IMAGES_DIR"
_mediator_render "$MEDIATOR_ROOT/deploy/image/containers.conf.in" \
    "$MEDIATOR_CONTAINERS_DIR/containers.conf" "TMP_DIR=$MEDIATOR_CONTAINERS_DIR/tmp"
_mediator_render "$MEDIATOR_ROOT/deploy/image/storage.conf.in" \
    "$MEDIATOR_CONTAINERS_DIR/storage.conf" \
    "GRAPHROOT=$MEDIATOR_CONTAINERS_DIR/storage" "RUNROOT=$MEDIATOR_CONTAINERS_DIR/run"
unset -f _mediator_render

export MEDIATOR_ROOT MEDIATOR_CONTAINERS_DIR MEDIATOR_IMAGES_DIR
export CONTAINERS_CONF="$MEDIATOR_CONTAINERS_DIR/containers.conf"
export CONTAINERS_STORAGE_CONF="$MEDIATOR_CONTAINERS_DIR/storage.conf"
