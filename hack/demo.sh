#!/usr/bin/env bash
# make demo: memifnet on a real one-node Kubernetes cluster on this machine, narrated. As root on
# Debian 12:
#   1. installs runc, iptables, iproute2 and the CNI plugins (apt) if missing;
#   2. builds, outside the repository, Kubernetes v1.34.4 as one binary (kubelet, kube-apiserver,
#      kube-controller-manager, kube-scheduler, kubectl, etcd) and containerd v2, then the
#      memifnet image (first run: about 25 min on 2 cores, then seconds; progress is printed);
#   3. runs hack/demo: the cluster comes up, `kubectl apply -k manifests/` installs memifnet,
#      the example pods run, two pods on a memif link measure throughput and round-trip
#      latency; then everything is torn down, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n==> %s\n' "$*"; }

if [[ $(id -u) != 0 ]]; then
	echo "make demo needs root (a kubelet, containerd, mounts, iptables, hugepages): sudo make demo" >&2
	exit 1
fi
missing=()
command -v runc >/dev/null || missing+=(runc)
command -v iptables >/dev/null || missing+=(iptables)
command -v ip >/dev/null || missing+=(iproute2)
[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
if ((${#missing[@]})); then
	say "installing ${missing[*]} (apt)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
say "runc $(runc --version | awk 'NR==1{print $3}'), CNI plugins in /usr/lib/cni"

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/demo" ./hack/demo
say "starting the demo (Ctrl-C at any point tears everything down)"
# In the foreground: Ctrl-C reaches the demo, which stops what it started (by PID) and cleans up.
"$bin/demo" "$@"
