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
# rebuild take seconds. A cold build is ~10 min on 2 cores.
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

if [[ ! -f .tidy-done ]]; then
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
	touch .tidy-done
fi

minor=${KUBELET_VERSION#v1.}
minor=${minor%%.*}
total=$(go list -deps k8s.io/kubernetes/cmd/kubelet | wc -l)
log "compiling kubelet: $total packages (cold: ~10 min on 2 cores; warm: seconds)"
start=$SECONDS
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBELET_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
# -v names each package as it is compiled (cached ones are not named): count them for progress.
CGO_ENABLED=0 go build -v -o "$out.tmp" -ldflags "$ldflags" k8s.io/kubernetes/cmd/kubelet 2>&1 |
	awk -v total="$total" '
		/^[a-zA-Z0-9._\/-]+$/ { n++; if (n % 100 == 0) { printf "[build-kubelet] compiled %d of at most %d packages\n", n, total; fflush() }; next }
		{ print; fflush() }' >&2
[[ ${PIPESTATUS[0]} == 0 ]] || { log "go build failed"; exit 1; }
mv "$out.tmp" "$out"
log "built $out in $((SECONDS - start)) s: $("$out" --version)"
echo "$out"
