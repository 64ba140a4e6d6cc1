#!/bin/sh
# Installs Prometheus and promtool (Debian's `prometheus` package) for the monitoring tests,
# when they are missing. The package starts a system service; the tests run their own server,
# so the service is stopped and disabled at once. Run as root on Debian or Ubuntu.
set -eu

if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends prometheus

# Whichever init system is there (none in most containers).
systemctl disable --now prometheus >/dev/null 2>&1 \
    || service prometheus stop >/dev/null 2>&1 \
    || true

promtool --version | head -n 1
