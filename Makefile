# memifnet: `make demo` shows it working on one node; `make test` runs every test.
GO       ?= go
BIN      ?= bin
PKGS     ?= ./...
# Each fuzz target runs this long in `make fuzz`.
FUZZTIME ?= 30s

.PHONY: all build test test-unit test-root lint fuzz bench demo clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/...

# Everything CI runs: lint, then every test with the race detector. Tests that need root, hugepages
# or dpdk-testpmd skip with a message when those are missing (and fail instead when CI=true).
test: lint
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

# Unprivileged, quick: what a laptop can run.
test-unit:
	$(GO) test -short -count=1 $(PKGS)

# The privileged tests only (root: hugepages, bind mounts, netns, DPDK interop); none may skip.
test-root:
	@[ "$$(id -u)" = 0 ] || { echo "test-root needs root"; exit 1; }
	CI=true $(GO) test -race -count=1 -timeout 20m -run 'DPDK|Hugepage|Pool|Root|Netns|CNI|Link|Scrub' $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./pkg/socket
	$(GO) test -run '^$$' -fuzz '^FuzzRxRing$$' -fuzztime $(FUZZTIME) ./pkg/memif

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/memif

demo:
	@echo "make demo: not yet (see issue: manifests, images, make demo on a real kubelet)"

clean:
	rm -rf $(BIN)
