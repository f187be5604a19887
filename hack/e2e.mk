# Images, the pinned kubelet, the end-to-end tests and the demo. Included from the Makefile
# (`include hack/e2e.mk`); uses its GO variable. All of these except `image` need root.
#
#   make image       build the image tarball $(E2E_OUT)/memifnet-image.tar (no container engine)
#   make kube        build (or reuse) the Kubernetes multi-call binary (kubelet, kube-apiserver,
#                    kube-controller-manager, kube-scheduler, kubectl, etcd) outside the repo
#   make kubelet     the same; prints the kubelet's path
#   make e2e         Tier 1 then Tier 2 (see docs/e2e.md)
#   make demo        one-node memifnet with two pods on a memif link (hack/demo.sh)

GO              ?= go
E2E_OUT         ?= hack/_out
IMAGE           ?= localhost/memifnet/memifnet:dev
KUBELET_VERSION ?= v1.34.4
E2E_BINS        := memif-cni memif-cni-podinfo memif-deviceplugin memif-perf memif-cni-install

.PHONY: image kube kubelet e2e e2e-tier1 e2e-tier2 demo

image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(E2E_OUT)/bin/ $(addprefix ./cmd/,$(E2E_BINS))
	$(GO) run ./hack/image -o $(E2E_OUT)/memifnet-image.tar -t $(IMAGE) \
		-entrypoint /usr/local/bin/memif-deviceplugin \
		$(foreach b,$(E2E_BINS),$(E2E_OUT)/bin/$(b)=/usr/local/bin/$(b))
	@echo "$(E2E_OUT)/memifnet-image.tar: $(IMAGE); load it with: ctr -n k8s.io images import $(E2E_OUT)/memifnet-image.tar"

kube:
	@KUBE_VERSION=$(KUBELET_VERSION) hack/build-kube.sh

kubelet:
	@d=$$(KUBE_VERSION=$(KUBELET_VERSION) hack/build-kube.sh) && echo "$$d/kubelet"

e2e: e2e-tier1 e2e-tier2

e2e-tier1:
	$(GO) test -tags e2e -count=1 -timeout 10m -v -run 'TestTier1' ./test/e2e/

e2e-tier2:
	@k=$$(KUBE_VERSION=$(KUBELET_VERSION) hack/build-kube.sh)/kubelet && \
		MEMIFNET_KUBELET=$$k $(GO) test -tags e2e -count=1 -timeout 15m -v -run 'TestTier2' ./test/e2e/

demo:
	hack/demo.sh
