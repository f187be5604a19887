#!/usr/bin/env bash
# `make test`: lint, every Go test with the race detector, then (as root, with containerd) the
# end-to-end tiers against a real containerd and a real kubelet (hack/e2e.mk, docs/e2e.md).
# Without root or containerd the e2e part is skipped with a message; with CI=true that is a failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}

e2e_missing=""
[ "$(id -u)" = 0 ] || e2e_missing="root"
command -v containerd >/dev/null || e2e_missing="$e2e_missing containerd"
[ -x /usr/lib/cni/bridge ] || [ -x /opt/cni/bin/bridge ] || e2e_missing="$e2e_missing containernetworking-plugins"
if [ -n "$e2e_missing" ] && [ "${CI:-}" = true ]; then
  echo "make test: the end-to-end tests need:$e2e_missing (.ci/run installs them)" >&2
  exit 1
fi

make lint
# The unit and privileged tests run first and alone: several of them assert latencies and
# reconnect times, and the kubelet build (next) would load both CPUs.
$GO test -race -count=1 -timeout 25m ./...

if [ -n "$e2e_missing" ]; then
  echo "make test: end-to-end tests SKIPPED, missing:$e2e_missing" \
    "(as root: apt-get install containerd runc containernetworking-plugins)"
  exit 0
fi
echo "make test: building the pinned kubelet for the end-to-end tests (cold: ~10 min on 2 cores)"
timeout 40m make kubelet
timeout 25m make e2e
