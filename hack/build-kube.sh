#!/usr/bin/env bash
# Builds the Kubernetes programs the end-to-end tiers run, as ONE multi-call binary, outside the
# repository: kubelet, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (all from
# k8s.io/kubernetes $KUBE_VERSION) and etcd (go.etcd.io/etcd/server/v3 $ETCD_VERSION, the
# version that Kubernetes release pins). Source of the binary: hack/kube/multicall.go.
#
# `go install k8s.io/kubernetes/cmd/kubelet@vX` refuses to build (the module's go.mod holds
# replace directives for its staging modules), so this makes a scratch module that requires
# k8s.io/kubernetes and etcd's server module and repeats those replace directives, pointing at
# the published staging versions. It then checks that module version selection kept every
# version Kubernetes pins (adding etcd must not raise grpc, otel, ...). Nothing fetched or built
# lands in the repository.
#
# Output: a directory holding `kube` and one symlink per program (kubelet, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, etcd); its path is the last stdout line.
# The directory name carries the versions and a hash of the multicall source and of this
# build's settings, so a present, complete directory is reused at once; otherwise the Go build
# cache makes a rebuild take seconds. Progress goes to stderr.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.34.4}
STAGING_VERSION=${STAGING_VERSION:-v0.${KUBE_VERSION#v1.}}
ETCD_VERSION=${ETCD_VERSION:-v3.6.4}
KUBE_CACHE=${KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memifnet/kube-build}
PROGRAMS=(kubelet kube-apiserver kube-controller-manager kube-scheduler kubectl etcd)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src="$here/kube/multicall.go"
log() { printf '[build-kube %s] %s\n' "$(date +%T)" "$*" >&2; }

minor=${KUBE_VERSION#v1.}
minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
key=$( { cat "$src"; echo "$ldflags"; go env GOVERSION; } | sha256sum | cut -c1-12)
out="$KUBE_CACHE/bin-$KUBE_VERSION-etcd-$ETCD_VERSION-$key"

if [[ -f $out/.complete ]] && "$out/kubelet" --version 2>/dev/null | grep -qx "Kubernetes $KUBE_VERSION"; then
	log "reusing $out"
	echo "$out"
	exit 0
fi

mod="$KUBE_CACHE/mod-$KUBE_VERSION-etcd-$ETCD_VERSION"
mkdir -p "$mod"
cd "$mod"
log "scratch module $mod (kubernetes $KUBE_VERSION, staging $STAGING_VERSION, etcd $ETCD_VERSION)"
# The source's `//go:build ignore` keeps memifnet's go commands away from it; not here.
sed '/^\/\/go:build ignore$/d' "$src" >main.go

if [[ ! -f .tidy-done ]]; then
	gomod=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
	[[ -f $gomod ]] || { log "could not download k8s.io/kubernetes@$KUBE_VERSION"; exit 1; }
	{
		echo "module kubebuild"
		echo
		echo "go 1.24.0"
		echo
		echo "godebug default=go1.24"
		echo
		echo "require ("
		echo "	k8s.io/kubernetes $KUBE_VERSION"
		echo "	go.etcd.io/etcd/server/v3 $ETCD_VERSION"
		echo ")"
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
	log "resolving dependencies (go mod tidy; ~1 min and ~1 GB on a cold module cache)"
	GOFLAGS=-mod=mod go mod tidy
	# Every module Kubernetes requires must keep the version Kubernetes pins: a version raised by
	# etcd (or anything else) would build a control plane nobody tested.
	raised=$(go list -m -f '{{.Path}} {{.Version}}' all |
		awk 'NR == FNR { if ($1 !~ /^k8s\.io\// && $2 ~ /^v/) pin[$1] = $2; next }
		     ($1 in pin) && pin[$1] != $2 { print $1 ": kubernetes pins " pin[$1] ", selected " $2 }' \
			<(sed -n '/^require (/,/^)/p' "$gomod" | awk 'NF >= 2 && $1 != "require" && $1 != ")" {print $1, $2}') -)
	if [[ -n $raised ]]; then
		log "module selection changed versions Kubernetes $KUBE_VERSION pins:"
		printf '%s\n' "$raised" >&2
		exit 1
	fi
	touch .tidy-done
fi

total=$(go list -deps . | wc -l)
log "compiling kube ($(IFS=,; echo "${PROGRAMS[*]}")): $total packages (cold: ~25 min on 2 cores; warm: seconds)"
start=$SECONDS
tmp="$out.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
# -v names each package as it is compiled (cached ones are not named): count them for progress.
CGO_ENABLED=0 go build -v -o "$tmp/kube" -ldflags "$ldflags" . 2>&1 |
	awk -v total="$total" '
		/^[a-zA-Z0-9._\/-]+$/ { n++; if (n % 100 == 0) { printf "[build-kube] compiled %d of at most %d packages\n", n, total; fflush() }; next }
		{ print; fflush() }' >&2
[[ ${PIPESTATUS[0]} == 0 ]] || { log "go build failed"; exit 1; }
for p in "${PROGRAMS[@]}"; do
	ln -s kube "$tmp/$p"
done
"$tmp/kubelet" --version | grep -qx "Kubernetes $KUBE_VERSION" || { log "kubelet --version is not Kubernetes $KUBE_VERSION"; exit 1; }
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
log "built $out in $((SECONDS - start)) s: $("$out/kubelet" --version), $("$out/etcd" --version | head -1)"
echo "$out"
