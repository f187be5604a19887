#!/usr/bin/env bash
# make demo: a real one-node memifnet on this machine, narrated. As root on Debian 12:
#   1. installs containerd, runc and the CNI plugins (apt) if missing;
#   2. builds the pinned kubelet outside the repository (first run ~10 min on 2 cores, then
#      seconds; progress is printed);
#   3. runs hack/demo: containerd + standalone kubelet + memif-deviceplugin + memif-cni, two
#      pods on a memif link running memif-perf (throughput, then round-trip latency), then
#      tears everything down, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n==> %s\n' "$*"; }

if [[ $(id -u) != 0 ]]; then
	echo "make demo needs root (containerd, kubelet, mounts, hugepages): sudo make demo" >&2
	exit 1
fi
missing=()
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
if ((${#missing[@]})); then
	say "installing ${missing[*]} (apt)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
say "containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1{print $3}'), CNI plugins in /usr/lib/cni"

say "kubelet (built from k8s.io/kubernetes, cached in ${XDG_CACHE_HOME:-$HOME/.cache}/memifnet)"
kubelet=$(hack/build-kube.sh)/kubelet

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/demo" ./hack/demo
say "starting the demo (Ctrl-C at any point tears everything down)"
# In the foreground: Ctrl-C reaches the demo, which stops what it started (by PID) and cleans up.
"$bin/demo" --kubelet "$kubelet" "$@"
