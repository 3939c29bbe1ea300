GO ?= go

.PHONY: build install services test test-short lint bench bench-smoke demo fuzz sqlmesh-bench

# The first build on a machine compiles every dependency, DuckDB's cgo
# bindings and the pure-Go SQLite among them; later builds take seconds.
build:
	@echo "building bin/gapless (go build ./cmd/gapless; a first build compiles every dependency, about a minute on 2 cores)"
	$(GO) build -o bin/gapless ./cmd/gapless
	@echo "built bin/gapless"

# Puts gapless on PATH: go install writes it to $$(go env GOBIN), or to
# $$(go env GOPATH)/bin when GOBIN is unset.
install:
	@echo "installing gapless into $$($(GO) env GOBIN | grep . || echo $$($(GO) env GOPATH)/bin) (go install ./cmd/gapless)"
	$(GO) install ./cmd/gapless
	@echo "installed; make sure that folder is on your PATH"

# Installs (when missing) and starts every server the tests need, and waits
# until each answers: PostgreSQL 15 on 127.0.0.1:5432 (Debian's packages),
# and Trino 476 (Maven Central, Java 24+), a coordinator on 127.0.0.1:8080
# and a worker on 127.0.0.1:8081, with an Iceberg catalog on local files.
services:
	bash scripts/services

# The test command the README gives and CI runs; needs `make services` first.
# A package's tests may take longer than go test's default 10 minutes: the
# Trino conformance suite alone runs about 150 scenarios of Iceberg commits.
test:
	$(GO) test -race -count=1 -timeout 30m ./...

# The inner loop (DEVELOPERS.md): fewer rapid checks, no test that starts
# gapless as an OS process. CI runs `make test`.
test-short:
	$(GO) test -race -count=1 -short -timeout 30m ./...

# golangci-lint with .golangci.yml. The pinned version is installed into
# bin/ on first use (go install; about 3 minutes on 2 cores) and kept there.
GOLANGCI_LINT_VERSION = v2.15.0
GOLANGCI_LINT = bin/golangci-lint-$(GOLANGCI_LINT_VERSION)

lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...

$(GOLANGCI_LINT):
	@echo "installing golangci-lint $(GOLANGCI_LINT_VERSION) into bin/ (go install, once)"
	GOBIN=$(CURDIR)/bin/.golangci-lint-$(GOLANGCI_LINT_VERSION) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv bin/.golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint $@
	rmdir bin/.golangci-lint-$(GOLANGCI_LINT_VERSION)

# Every benchmark once, so CI notices a broken one; figures come from `make bench`.
bench-smoke:
	$(GO) test -short -run '^$$' -bench . -benchtime 1x ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Short coverage-guided fuzzing of every fuzz target.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse$$ -fuzztime 30s ./cron/
	$(GO) test -run '^$$' -fuzz FuzzParseFile -fuzztime 30s ./model/
	$(GO) test -run '^$$' -fuzz FuzzParse$$ -fuzztime 30s ./sqlparse/
	$(GO) test -run '^$$' -fuzz FuzzIntake -fuzztime 30s ./bot/

# The main job on the embedded default (DuckDB warehouse, SQLite state), in a
# temporary folder: write the example project, deploy prod with one day of
# history, land the source raw.orders from its three CSV files, run the
# scheduler five hours later, and show the state, the source and a served
# view. Fixed execution times keep the output stable (only the plan id, the
# promotion's wall-clock time and the source's staging times vary).
DEMO_T0 = 2024-01-02T00:30:00Z
DEMO_T1 = 2024-01-02T05:30:00Z

demo: build
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
	set -e && \
	gl() { echo; echo "\$$ gapless $$*"; ./bin/gapless -p "$$dir/quickstart" --log-level warn "$$@"; } && \
	./bin/gapless init "$$dir/quickstart" && \
	gl models --execution-time $(DEMO_T0) && \
	gl plan --auto-apply --execution-time $(DEMO_T0) && \
	gl ingest --once && \
	gl run --execution-time $(DEMO_T1) && \
	gl status --execution-time $(DEMO_T1) && \
	gl sources && \
	gl query "SELECT * FROM demo.top_customers"

# Side by side with SQLMesh (bench/sqlmesh/README.md): one project deployed,
# run and changed by both tools on DuckDB, rows compared, plan/deploy/run
# timed; SQLMesh is installed from PyPI into ~/.cache/gapless/sqlmesh-venv.
# On demand only: make test does not run it.
sqlmesh-bench:
	bash bench/sqlmesh/run.sh
