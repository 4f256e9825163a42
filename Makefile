# stackd — `make demo` shows the product, `make test` proves it.
GO      ?= go
BIN     ?= bin/stackd
PKGS    := ./...

.PHONY: all build test demo lint bench chaos fuzz verify clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=true -ldflags="-s -w" -o $(BIN) ./cmd/stackd

test:
	$(GO) test -race -timeout 10m $(PKGS)

demo:
	$(GO) run ./cmd/stackd demo

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

# BENCHFLAGS, e.g. "--targets-dir /dev/shm" or "--regions 100 --accounts 100"
BENCHFLAGS ?=

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	$(GO) run ./cmd/stackd bench $(BENCHFLAGS)

# The crash tests with more kills than CI's 30 and 10: make chaos KILLS=200
# ROLLOUT_KILLS=100 (STACKD_CHAOS_SEED=N, STACKD_ROLLOUT_CHAOS_SEED=N replay a run).
KILLS ?= 100
ROLLOUT_KILLS ?= 50

chaos:
	STACKD_CHAOS_KILLS=$(KILLS) $(GO) test -race -count=1 -timeout 60m -run '^TestChaosKillAndRestart$$' -v ./cmd/stackd/
	STACKD_ROLLOUT_CHAOS_KILLS=$(ROLLOUT_KILLS) $(GO) test -race -count=1 -timeout 60m -run '^TestRolloutChaos$$' -v ./cmd/stackd/

# Every fuzz target for FUZZTIME each (CI runs only the seed corpora).
FUZZTIME ?= 10m

fuzz:
	@for t in $$(grep -rlE '^func Fuzz' --include='*_test.go' . | xargs -n1 dirname | sort -u); do \
	  for f in $$(grep -hoE '^func Fuzz[A-Za-z0-9_]+' $$t/*_test.go | cut -c6-); do \
	    echo "== $$t $$f"; $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$t || exit 1; \
	  done; \
	done

verify: lint
	$(GO) mod tidy
	@git diff --exit-code -- go.mod go.sum || (echo "go.mod/go.sum not tidy"; exit 1)

clean:
	rm -rf bin
