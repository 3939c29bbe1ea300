GO ?= go

.PHONY: build test bench bench-smoke demo fuzz

build:
	$(GO) build -o bin/gapless ./cmd/gapless

# The test command the README gives and CI runs.
test:
	$(GO) test -race -count=1 ./...

# Every benchmark once, so CI notices a broken one; figures come from `make bench`.
bench-smoke:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Short coverage-guided fuzzing of every fuzz target.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse$$ -fuzztime 30s ./cron/
	$(GO) test -run '^$$' -fuzz FuzzParseFile -fuzztime 30s ./model/
	$(GO) test -run '^$$' -fuzz FuzzParse$$ -fuzztime 30s ./sqlparse/

# The main job on the embedded default: load the example project, print its
# DAG, versions and the intervals due now.
demo: build
	./bin/gapless models -p examples/quickstart --execution-time 2024-03-01T00:00:00Z
