# memifnet: `make demo` shows it working on one node; `make test` runs every test.
GO       ?= go
BIN      ?= bin
PKGS     ?= ./...
# Each fuzz target runs this long in `make fuzz`.
FUZZTIME ?= 30s

.PHONY: all build test test-unit test-root lint fuzz bench bench-compare release clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/...

# Everything CI runs: lint, every test with the race detector, then the end-to-end tiers (root,
# containerd). Tests that need root, hugepages, dpdk-testpmd or containerd skip with a message when
# those are missing, and fail instead when CI=true. See hack/test.sh.
test:
	GO=$(GO) hack/test.sh

# Unprivileged, quick: what a laptop can run.
test-unit:
	$(GO) test -short -count=1 $(PKGS)

# The privileged tests only (root: hugepages, bind mounts, netns, DPDK interop); none may skip.
test-root:
	@[ "$$(id -u)" = 0 ] || { echo "test-root needs root"; exit 1; }
	CI=true $(GO) test -race -count=1 -timeout 20m -run 'DPDK|Hugepage|Pool|Root|Netns|CNI|Link|Scrub' $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	$(GO) vet -tags e2e $(PKGS)
	$(GO) tool staticcheck -tags e2e $(PKGS)

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./pkg/socket
	$(GO) test -run '^$$' -fuzz '^FuzzRxRing$$' -fuzztime $(FUZZTIME) ./pkg/memif
	$(GO) test -run '^$$' -fuzz '^FuzzGenerate$$' -fuzztime $(FUZZTIME) ./internal/peerconf

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/memif

# Go vs DPDK side by side (root, dpdk-dev): interleaved runs, medians, ratios; see docs/performance.md.
bench-compare:
	hack/bench.sh

# A versioned release into dist/$(VERSION)/ (hack/release; docs/release.md): the linux/amd64 +
# linux/arm64 image as an OCI archive, one install YAML per overlay pinned to the image digest,
# kubectl-memifnet per platform with a Krew manifest, an SPDX SBOM, SHA256SUMS.
# make release VERSION=v0.1.0 [REGISTRY=ghcr.io/memifnet]  (the image is $(REGISTRY)/memifnet)
REGISTRY ?= ghcr.io/memifnet
release:
	@case "$(VERSION)" in v[0-9]*) ;; *) echo "make release VERSION=v0.x.y (got '$(VERSION)')"; exit 1;; esac
	$(GO) run ./hack/release -version $(VERSION) -registry $(REGISTRY) -o dist

clean:
	rm -rf $(BIN) hack/_out dist

# image, kubelet, e2e, e2e-tier1, e2e-tier2, demo
include hack/e2e.mk
