# stackd — `make demo` shows the product, `make test` proves it.
GO      ?= go
BIN     ?= bin/stackd
PKGS    := ./...

.PHONY: all build test demo lint bench verify clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w" -o $(BIN) ./cmd/stackd

test:
	$(GO) test -race -timeout 10m $(PKGS)

demo:
	$(GO) run ./cmd/stackd demo

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

# BENCHFLAGS, e.g. "--targets-dir /dev/shm" or "--regions 100 --accounts 100"
BENCHFLAGS ?=

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	$(GO) run ./cmd/stackd bench $(BENCHFLAGS)

verify: lint
	$(GO) mod tidy
	@git diff --exit-code -- go.mod go.sum || (echo "go.mod/go.sum not tidy"; exit 1)

clean:
	rm -rf bin
