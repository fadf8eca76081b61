# The two commands a newcomer needs: `make run` and `make test`. Both start a throwaway
# PostgreSQL under .tmp/ (scripts/pg) unless DATABASE_URL / TEST_DATABASE_URL is set.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
DEMO_ROWS ?= 100000
DEMO_DB ?= sweeprail

.PHONY: run test lint bench build check-deploy pg-start pg-stop pg-destroy

build:
	@mkdir -p bin
	$(GO) build -o bin/ ./cmd/...

## run: PostgreSQL, migrations, demo data, the API with a fresh key, one sweepcron run; serves until Ctrl-C.
run: build
	@scripts/run-demo

## test: every test, with the race detector, against a real PostgreSQL.
test:
	@url="$${TEST_DATABASE_URL:-$$(scripts/pg start)}"; \
	TEST_DATABASE_URL="$$url" $(GO) test -race -count=1 ./...

## check-deploy: the deployment files alone (promtool, YAML, command lines against the real binaries).
check-deploy:
	$(GO) test -count=1 ./deploy/

## lint: gofmt, go vet, staticcheck.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

## bench: the rail side by side with a monolithic DELETE and ordered batches, on its own
## PostgreSQL with fsync on; writes docs/BENCHMARKS.md. BENCH_ROWS=N sizes the table (default
## 1000000); BENCH_SCALE=1 runs the 1M/5M scale run instead. The cluster is stopped at the end.
bench:
	@mkdir -p bin; $(GO) build -o bin/ ./cmd/...; \
	export PG_DIR="$(CURDIR)/.tmp/pg-bench" PG_FSYNC=on; \
	url=$$(scripts/pg start); trap 'scripts/pg stop' EXIT; \
	BENCH_DATABASE_URL="$$url" bin/sweepbench; \
	echo "make bench: done in $${SECONDS}s"

pg-start:
	@scripts/pg start
pg-stop:
	@scripts/pg stop
pg-destroy:
	@scripts/pg destroy
