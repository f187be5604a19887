#!/usr/bin/env bash
# Builds a pinned kubelet from the k8s.io/kubernetes Go module, outside the repository.
#
# `go install k8s.io/kubernetes/cmd/kubelet@vX` refuses to build (the module's go.mod holds
# replace directives for its staging modules), so this makes a scratch module that requires
# k8s.io/kubernetes and repeats those replace directives, pointing at the published staging
# versions. Nothing fetched or built lands in the repository.
#
# Output: $KUBELET_CACHE/kubelet-$KUBELET_VERSION (path printed on the last stdout line).
# A present binary that reports the right version is reused; the Go build cache makes a
# rebuild after `go clean -cache`-free runs take seconds. A cold build is ~10 min on 2 cores.
set -euo pipefail

KUBELET_VERSION=${KUBELET_VERSION:-v1.34.4}
STAGING_VERSION=${STAGING_VERSION:-v0.${KUBELET_VERSION#v1.}}
KUBELET_CACHE=${KUBELET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memifnet/kubelet-build}
out="$KUBELET_CACHE/kubelet-$KUBELET_VERSION"

log() { printf '[build-kubelet %s] %s\n' "$(date +%T)" "$*" >&2; }

if [[ -x $out ]] && "$out" --version 2>/dev/null | grep -qx "Kubernetes $KUBELET_VERSION"; then
	log "reusing $out"
	echo "$out"
	exit 0
fi

mod="$KUBELET_CACHE/mod-$KUBELET_VERSION"
mkdir -p "$mod"
cd "$mod"
log "scratch module $mod (kubelet $KUBELET_VERSION, staging $STAGING_VERSION)"

if [[ ! -f go.sum ]]; then
	gomod=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBELET_VERSION" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
	[[ -f $gomod ]] || { log "could not download k8s.io/kubernetes@$KUBELET_VERSION"; exit 1; }
	{
		echo "module kubeletbuild"
		echo
		echo "go 1.24.0"
		echo
		echo "require k8s.io/kubernetes $KUBELET_VERSION"
		echo
		echo "replace ("
		grep -oE '^[[:space:]]*k8s.io/[^[:space:]]+ => ./staging' "$gomod" |
			awk -v v="$STAGING_VERSION" '{print "\t" $1 " => " $1 " " v}'
		echo ")"
	} >go.mod.new
	n=$(grep -c '=> k8s.io/' go.mod.new)
	log "generated $n replace directives from $gomod"
	[[ $n -gt 20 ]] || { log "too few replace directives ($n)"; exit 1; }
	mv go.mod.new go.mod
	cat >tools.go <<'GO'
//go:build tools

package kubeletbuild

import _ "k8s.io/kubernetes/cmd/kubelet"
GO
	log "resolving dependencies (go mod tidy; ~30 s and ~0.9 GB on a cold module cache)"
	GOFLAGS=-mod=mod go mod tidy
fi

minor=${KUBELET_VERSION#v1.}
minor=${minor%%.*}
log "compiling kubelet (cold: ~10 min on 2 cores; warm: seconds)"
start=$SECONDS
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBELET_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
CGO_ENABLED=0 go build -o "$out.tmp" -ldflags "$ldflags" k8s.io/kubernetes/cmd/kubelet &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' INT TERM
while kill -0 "$pid" 2>/dev/null; do
	sleep 15 & wait $! || true
	kill -0 "$pid" 2>/dev/null && log "still compiling ($((SECONDS - start)) s)"
done
wait "$pid"
trap - INT TERM
mv "$out.tmp" "$out"
log "built $out in $((SECONDS - start)) s: $("$out" --version)"
echo "$out"
