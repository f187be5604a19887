#!/usr/bin/env bash
# `make test`: lint, every Go test with the race detector, then (as root) the end-to-end tiers:
# Tier 1 (containerd 1.6 + memif-cni), Tier 2 (a real kubelet) and Tier 3 (a real one-node
# cluster: `kubectl apply -k manifests/`), see hack/e2e.mk and docs/e2e.md.
# Without root or the node packages the e2e part is skipped with a message; with CI=true that is
# a failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}

e2e_missing=""
[ "$(id -u)" = 0 ] || e2e_missing="root"
command -v containerd >/dev/null || e2e_missing="$e2e_missing containerd"
command -v runc >/dev/null || e2e_missing="$e2e_missing runc"
command -v iptables >/dev/null || e2e_missing="$e2e_missing iptables"
[ -x /usr/lib/cni/bridge ] || e2e_missing="$e2e_missing containernetworking-plugins"
if [ -n "$e2e_missing" ] && [ "${CI:-}" = true ]; then
  echo "make test: the end-to-end tests need:$e2e_missing (.ci/run installs them)" >&2
  exit 1
fi

# The Kubernetes, containerd and Multus builds of the e2e tiers (cold: the longest part of a CI
# run) go on in the background while lint runs, which nothing times; they must be done before
# the unit tests, several of which assert latencies and reconnect times.
build_pid=""
build_log=$(mktemp)
trap 'rm -f "$build_log"; [ -z "$build_pid" ] || kill "$build_pid" 2>/dev/null || true' EXIT
if [ -z "$e2e_missing" ]; then
  echo "make test: building Kubernetes v1.34.4, containerd v2 and Multus in the background (cold: see docs/e2e.md)"
  $GO run ./hack/cluster build >"$build_log" 2>&1 &
  build_pid=$!
fi

make lint

if [ -n "$build_pid" ]; then
  echo "make test: waiting for the builds"
  if ! wait "$build_pid"; then
    build_pid=""
    cat "$build_log" >&2
    echo "make test: the builds for the end-to-end tests failed" >&2
    exit 1
  fi
  build_pid=""
  grep -E '^\[build-[a-z]+ [0-9:]+\] (built|reusing)' "$build_log" || true
fi

$GO test -race -count=1 -timeout 25m ./...

if [ -n "$e2e_missing" ]; then
  echo "make test: end-to-end tests SKIPPED, missing:$e2e_missing" \
    "(as root: apt-get install containerd runc iptables containernetworking-plugins)"
  exit 0
fi
timeout 50m make e2e
