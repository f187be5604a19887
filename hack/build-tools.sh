#!/usr/bin/env bash
# Builds the cluster tier's other node programs from their Go modules, outside the repository:
#
#   hack/build-tools.sh containerd   containerd v2 (CRI with CDI), containerd-shim-runc-v2, ctr
#                                    from github.com/containerd/containerd/v2 $CONTAINERD_VERSION
#   hack/build-tools.sh multus       the Multus thin CNI plugin (`multus`) from
#                                    gopkg.in/k8snetworkplumbingwg/multus-cni.v4 $MULTUS_VERSION
#   hack/build-tools.sh helm         the helm CLI from helm.sh/helm/v4 $HELM_VERSION (the chart's
#                                    tests and tier 3 render, lint and install charts/memifnet)
#   hack/build-tools.sh multus-thick the Multus thick plugin from the same module and version: its
#                                    daemon (`multus-daemon`), the node's CNI shim (`multus-shim`),
#                                    its installer (`install_multus`) and `passthru-cni`
#
# Each is built in a scratch module that requires only that module, so module selection is the
# module's own (neither has replace directives). Multus's module zip carries vendor/modules.txt
# but not the vendored packages (module zips leave vendor/ out), so it builds from the module
# cache like any other module. Static binaries (CGO_ENABLED=0). containerd is built without the
# snapshotters and plugins this machine does not use (btrfs needs cgo; devmapper, zfs, tracing).
#
# Output: a directory holding the binaries; its path is the last stdout line. A present,
# complete directory (named after the version and a hash of the build settings) is reused.
set -euo pipefail

CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
MULTUS_VERSION=${MULTUS_VERSION:-v4.2.2}
HELM_VERSION=${HELM_VERSION:-v4.3.2}
TOOLS_CACHE=${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memifnet/tools-build}

what=${1:-}
case $what in
containerd)
	module=github.com/containerd/containerd/v2
	version=$CONTAINERD_VERSION
	pkgs=(cmd/containerd cmd/containerd-shim-runc-v2 cmd/ctr)
	tags="urfave_cli_no_docs no_btrfs no_devmapper no_zfs no_tracing osusergo netgo"
	ldflags="-s -w -X $module/version.Version=$version -X $module/version.Package=$module"
	check=(containerd --version)
	;;
multus)
	module=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
	version=$MULTUS_VERSION
	pkgs=(cmd/multus)
	tags=""
	ldflags="-s -w -X $module/pkg/multus.version=$version"
	check=(multus --version)
	;;
helm)
	module=helm.sh/helm/v4
	version=$HELM_VERSION
	pkgs=(cmd/helm)
	tags=""
	ldflags="-s -w -X $module/internal/version.version=$version"
	check=(helm version --short)
	;;
multus-thick)
	module=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
	version=$MULTUS_VERSION
	pkgs=(cmd/multus-daemon cmd/multus-shim cmd/install_multus cmd/passthru-cni)
	tags=""
	ldflags="-s -w -X $module/pkg/multus.version=$version"
	check=(multus-shim --version)
	;;
*)
	echo "usage: $0 containerd|multus|multus-thick|helm" >&2
	exit 2
	;;
esac

log() { printf '[build-%s %s] %s\n' "$what" "$(date +%T)" "$*" >&2; }
key=$( { echo "$module $version ${pkgs[*]} $tags $ldflags"; go env GOVERSION; } | sha256sum | cut -c1-12)
out="$TOOLS_CACHE/$what-$version-$key"
if [[ -f $out/.complete ]]; then
	log "reusing $out"
	echo "$out"
	exit 0
fi

mod="$TOOLS_CACHE/mod-$what-$version"
mkdir -p "$mod"
cd "$mod"
if [[ ! -f .tidy-done ]]; then
	gomod=$(GOFLAGS=-mod=mod go mod download -json "$module@$version" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
	[[ -f $gomod ]] || { log "could not download $module@$version"; exit 1; }
	if grep -q '^[[:space:]]*replace\b' "$gomod"; then
		log "$module@$version has replace directives: a scratch module would not build what it pins"
		exit 1
	fi
	{
		echo "module ${what//-/}build"
		echo
		grep -m1 '^go ' "$gomod"
		echo
		echo "require $module $version"
	} >go.mod
	{
		echo "//go:build tools"
		echo
		echo "package ${what//-/}build"
		echo
		for p in "${pkgs[@]}"; do echo "import _ \"$module/$p\""; done
	} >tools.go
	log "resolving dependencies of $module@$version (go mod tidy)"
	GOFLAGS=-mod=mod go mod tidy
	# The scratch module must select exactly what the module itself requires.
	changed=$(go list -m -f '{{.Path}} {{.Version}}' all |
		awk 'NR == FNR { pin[$1] = $2; next } ($1 in pin) && pin[$1] != $2 { print $1 ": " pin[$1] " -> " $2 }' \
			<(awk '/^require \(/ { in_req = 1; next } in_req && /^\)/ { in_req = 0 }
			       in_req && NF >= 2 { print $1, $2 } /^require [^(]/ { print $2, $3 }' "$gomod") -)
	[[ -z $changed ]] || { log "module selection differs from $module@$version's go.mod:"; echo "$changed" >&2; exit 1; }
	touch .tidy-done
fi

full=("${pkgs[@]/#/$module/}")
total=$(go list -tags "$tags" -deps "${full[@]}" | wc -l)
log "compiling ${pkgs[*]} of $module@$version: $total packages"
start=$SECONDS
tmp="$out.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
CGO_ENABLED=0 go build -v -trimpath -tags "$tags" -ldflags "$ldflags" -o "$tmp/" "${full[@]}" 2>&1 |
	awk -v total="$total" -v what="$what" '
		/^[a-zA-Z0-9._\/-]+$/ { n++; if (n % 100 == 0) { printf "[build-%s] compiled %d of at most %d packages\n", what, n, total; fflush() }; next }
		{ print; fflush() }' >&2
[[ ${PIPESTATUS[0]} == 0 ]] || { log "go build failed"; exit 1; }
"$tmp/${check[0]}" "${check[@]:1}" >&2 || { log "${check[*]} failed"; exit 1; }
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
log "built $out in $((SECONDS - start)) s"
echo "$out"
