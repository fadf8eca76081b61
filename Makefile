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

## test-reliability: the reliability suite of docs/RELIABILITY.md, long tests included (kill -9,
## PostgreSQL restart, a 60s load of three APIs and four sweepcron loops, hostile requests), then
## every fuzz target for FUZZTIME each (minimizing a new input for at most 1s, so a short budget
## explores rather than minimizes; a failing input is still printed). About four minutes.
FUZZTIME ?= 10s
FUZZ_TARGETS := internal/signing:FuzzVerify internal/signing:FuzzVerifyTampered \
	internal/httpapi:FuzzDecodeSweepRequest internal/httpapi:FuzzUnsignedRequest internal/httpapi:FuzzSignedBody \
	internal/config:FuzzLoadAPI internal/config:FuzzLoadCron internal/config:FuzzLoadAPINumbersAndSecrets internal/config:FuzzParseDays
.PHONY: test-reliability
test-reliability:
	@url="$${TEST_DATABASE_URL:-$$(scripts/pg start)}"; \
	TEST_DATABASE_URL="$$url" RELIABILITY=1 $(GO) test -race -count=1 -timeout 15m -v ./internal/reliability/
	@for t in $(FUZZ_TARGETS); do \
		echo "--- fuzz $${t#*:} (./$${t%%:*}) for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$${t#*:}\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=1s ./$${t%%:*}/ || exit 1; \
	done

## lint: gofmt, go vet, staticcheck.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

## bench: the rail side by side with a monolithic DELETE and ordered batches, then the replica-lag
## run (a streaming standby, healthy and slowed; BENCH_REPLICA=0 leaves it out, =only runs it
## alone), then each access path on a dense, a sparse, a job-queue and a locked table
## (BENCH_PATHS=0 leaves it out, =only runs it alone), on its own PostgreSQL with fsync on; writes
## docs/BENCHMARKS.md. BENCH_ROWS=N sizes the tables (default 1000000), BENCH_SPARSE_ROWS the
## paths run's sparse one (5000000); BENCH_SCALE=1 runs the 1M/5M scale run instead;
## BENCH_PARTITIONS=1 the partitions run (10M rows, BENCH_PARTITION_ROWS; installs pg_partman when
## missing); BENCH_CROSSOVER=1 the access paths' crossover. The cluster is stopped at the end.
bench:
	@mkdir -p bin; $(GO) build -o bin/ ./cmd/...; \
	if [ "$${BENCH_PARTITIONS:-0}" = 1 ]; then scripts/pg ensure-ext partman; fi; \
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
