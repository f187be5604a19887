# Images, the pinned Kubernetes programs, the one-node cluster, the end-to-end tests and the demo.
# Included from the Makefile (`include hack/e2e.mk`); uses its GO variable. All of these except
# `image` and the builds need root. See docs/e2e.md.
#
#   make image        build the image tarball $(E2E_OUT)/memifnet-image.tar (no container engine),
#                     and the cluster's pause image $(E2E_OUT)/pause-image.tar
#   make image-dpdk   the DPDK image $(E2E_OUT)/dpdk-image.tar from the node's Debian DPDK packages
#                     (hack/dpdk-image.sh; only where dpdk-testpmd is installed, else a note)
#   make kube         build (or reuse) the Kubernetes multi-call binary (kubelet, kube-apiserver,
#                     kube-controller-manager, kube-scheduler, kubectl, etcd) outside the repo
#   make kubelet      the same; prints the kubelet's path
#   make cluster-up   a real cluster, NODES nodes (default 1; builds what is missing), CNI_PATHS
#                     (kubeadm or k3s); last lines
#                     KUBECONFIG=, KUBECTL=
#   make cluster-down stop it and undo every host change
#   make e2e          Tier 1, Tier 2, then Tier 3 (the cluster)
#   make demo         memifnet on the one-node cluster, narrated (hack/demo.sh)

GO              ?= go
E2E_OUT         ?= hack/_out
IMAGE           ?= localhost/memifnet/memifnet:dev
PAUSE_IMAGE     ?= localhost/memifnet/pause:dev
DPDK_IMAGE      ?= localhost/memifnet/dpdk:dev
KUBELET_VERSION ?= v1.34.4
# make cluster-up NODES=3: node 1 is this machine, the others network and mount namespaces of it
# (docs/e2e.md, "Several nodes").
NODES           ?= 1
# make cluster-up CNI_PATHS=k3s: the nodes' CNI dirs and kubelet kubeconfig where k3s keeps them
# (manifests/components/cni-paths/k3s; docs/e2e.md, "Distribution paths").
CNI_PATHS       ?= kubeadm
# The build the binaries report (memif-deviceplugin logs it at start): an upgrade test builds a
# second image with another VERSION and IMAGE tag.
VERSION         ?= dev
E2E_BINS        := memif-cni memif-cni-podinfo memif-deviceplugin memif-perf memif-cni-install memif-webhook kubectl-memifnet

.PHONY: image image-dpdk kube kubelet cluster-up cluster-down e2e e2e-tier1 e2e-tier2 e2e-tier3 demo

image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w -X main.version=$(VERSION)' -o $(E2E_OUT)/bin/ $(addprefix ./cmd/,$(E2E_BINS)) ./hack/pause
	$(GO) run ./hack/image -o $(E2E_OUT)/memifnet-image.tar -t $(IMAGE) \
		-entrypoint /usr/local/bin/memif-deviceplugin \
		$(foreach b,$(E2E_BINS),$(E2E_OUT)/bin/$(b)=/usr/local/bin/$(b))
	$(GO) run ./hack/image -o $(E2E_OUT)/pause-image.tar -t $(PAUSE_IMAGE) -entrypoint /pause $(E2E_OUT)/bin/pause=/pause
	@echo "$(E2E_OUT)/memifnet-image.tar: $(IMAGE); load it with: ctr -n k8s.io images import $(E2E_OUT)/memifnet-image.tar"
	@echo "$(E2E_OUT)/pause-image.tar: $(PAUSE_IMAGE) (the cluster tier's sandbox image)"

image-dpdk:
	@if command -v dpdk-testpmd >/dev/null; then \
		CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(E2E_OUT)/bin/ ./hack/memif-testpmd && \
		GO=$(GO) hack/dpdk-image.sh $(E2E_OUT)/dpdk-image.tar $(DPDK_IMAGE) $(E2E_OUT)/bin/memif-testpmd; \
	else echo "image-dpdk: no dpdk-testpmd here (apt-get install dpdk-dev): no DPDK image built"; fi

kube:
	@KUBE_VERSION=$(KUBELET_VERSION) hack/build-kube.sh

kubelet:
	@d=$$(KUBE_VERSION=$(KUBELET_VERSION) hack/build-kube.sh) && echo "$$d/kubelet"

cluster-up:
	$(GO) run ./hack/cluster --nodes=$(NODES) --cni-paths=$(CNI_PATHS) up

cluster-down:
	$(GO) run ./hack/cluster down

e2e: e2e-tier1 e2e-tier2 e2e-tier3

e2e-tier1:
	$(GO) test -tags e2e -count=1 -timeout 10m -v -run 'TestTier1' ./test/e2e/

e2e-tier2:
	@k=$$(KUBE_VERSION=$(KUBELET_VERSION) hack/build-kube.sh)/kubelet && \
		MEMIFNET_KUBELET=$$k $(GO) test -tags e2e -count=1 -timeout 15m -v -run 'TestTier2' ./test/e2e/

demo:
	hack/demo.sh

# The cluster tier brings its own cluster up (hack/cluster's library) and down; builds first.
e2e-tier3:
	$(GO) test -tags e2e -count=1 -timeout 40m -v -run 'TestTier3' ./test/e2e/
