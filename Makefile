# failoverd — the two commands a newcomer needs are `make playground` and
# `make test`. Everything the tests start is installed by scripts/deps.
SHELL := /bin/bash
GO ?= go
# The release: the VERSION file is its only source (the binary embeds it; the
# image tag, its labels and the Helm chart follow it; release_test.go checks).
VERSION := $(shell cat VERSION)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.commit=$(COMMIT)
IMAGE ?= ghcr.io/failoverd/failoverd
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 30s
TEST_TIMEOUT ?= 60m
# Every real-server test runs on both engines (MariaDB 10.11, MySQL 9.7);
# FAILOVERD_TEST_ENGINE=mariadb or mysql narrows a local run to one.
FAILOVERD_TEST_ENGINE ?= both
export FAILOVERD_TEST_ENGINE
FAILOVERD_CACHE ?= $(HOME)/.cache/failoverd
PROMTOOL := $(FAILOVERD_CACHE)/bin/promtool

.PHONY: all build test test-short deps lint fmt fuzz-short bench playground clean test-rules image chart-files

all: build

build: ## build bin/failoverd
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/failoverd ./cmd/failoverd

deps: ## install MariaDB and Redis, build the MySQL 9.7 root, etcd, kube-apiserver, promtool and helm (cached)
	./scripts/deps

test: deps lint ## everything: lint, unit and e2e tests on real servers of both engines, short fuzzing
	$(GO) build ./...
	$(MAKE) --no-print-directory test-rules
	@# leftovers runs even when a test failed: a failing test is the likeliest to leak a server.
	@# SIM_SEEDS: the simulation runs its full 10,000 seeds here too (about a minute, with 3,333 sidecar histories).
	rc=0; SIM_SEEDS=$(SIM_SEEDS) $(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) ./... || rc=$$?; \
	  ./scripts/leftovers || rc=1; exit $$rc
	$(MAKE) --no-print-directory fuzz-short
	./scripts/leftovers

test-short: ## unit tests only (go test -short): no real servers, no tools from scripts/deps, 300 simulated histories; a couple of minutes
	$(GO) test -short -count=1 ./...

lint: ## gofmt check, go vet, staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt wants to rewrite:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

image: ## build the container image $(IMAGE):$(VERSION) (the tag every manifest and the chart use)
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE):$(VERSION) .

# The chart cannot read outside its directory: it carries copies of the alert
# rules and the dashboard (TestChartFilesAreDeployCopies keeps them equal).
CHART_FILES := deploy/helm/failoverd/files
chart-files: ## copy deploy/prometheus's rules and deploy/grafana's dashboard into the Helm chart
	cp deploy/prometheus/failoverd-rules.yml $(CHART_FILES)/failoverd-rules.yml
	cp deploy/grafana/failoverd.json $(CHART_FILES)/failoverd-dashboard.json

test-rules: deps ## promtool check and unit tests of the alert rules in deploy/prometheus
	$(PROMTOOL) check rules deploy/prometheus/failoverd-rules.yml
	cd deploy/prometheus && $(PROMTOOL) test rules failoverd-rules.test.yml

fmt: ## rewrite Go files with gofmt
	gofmt -w $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')

fuzz-short: ## run every fuzzer for $(FUZZTIME)
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
	    echo "fuzz $$pkg $$f for $(FUZZTIME)"; \
	    $(GO) test $$pkg -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME); \
	  done; \
	done

BENCH_RUNS ?= 20
BENCH_QUICK_RUNS ?= 5
BENCH_QUICK := ^Benchmark(RTOKill9|RTOKill9Sidecar|SwitchoverUnavailability|RTOHung|RTOIsolation|RTOHungSidecar|RTOIsolationSidecar|RTOBacklog|FalseFailovers|FalseFailoversSidecar)$$
.PHONY: bench-quick
bench: deps ## every benchmark, the real-server ones on both engines (BENCH_RUNS runs per figure and engine); results land in docs/benchmarks/ (results.json, README.md, failover.svg); fails when a figure misses its target
	@start=$$(date +%s); rc=0; \
	  FAILOVERD_BENCH_WRITE=1 FAILOVERD_BENCH_RUNS=$(BENCH_RUNS) $(GO) test -count=1 -p 1 -timeout 4h -run='^$$' -bench=. -benchtime=1x ./test/e2e/ ./poller/ ./api/ || rc=$$?; \
	  $(GO) test -count=1 -run='^$$' -bench=. -benchmem ./gtid/ ./sitepair/ || rc=$$?; \
	  ./scripts/leftovers || rc=1; \
	  $(GO) run ./test/benchreport -check -since $$start || rc=1; exit $$rc

bench-quick: deps ## reduced benchmarks (a few minutes); fails when a figure it measured misses its target
	@start=$$(date +%s); rc=0; \
	  FAILOVERD_BENCH_WRITE=1 FAILOVERD_BENCH_QUICK=1 FAILOVERD_BENCH_RUNS=$(BENCH_QUICK_RUNS) FAILOVERD_BENCH_BLIPS=20 FAILOVERD_BENCH_PARTITIONS=3 FAILOVERD_BENCH_SIDECAR_BLIPS=5 \
	  $(GO) test -count=1 -timeout 20m -run='^$$' -bench='$(BENCH_QUICK)' -benchtime=1x ./test/e2e/ || rc=$$?; \
	  ./scripts/leftovers || rc=1; \
	  $(GO) run ./test/benchreport -check -since $$start || rc=1; exit $$rc

playground: ## a real three-site group on 127.0.0.1 and a scripted failover (ARGS="--engine=mysql --interactive --with-kubernetes", or --replication=group)
	@if echo " $(ARGS) " | grep -q -- "-with-kubernetes"; then ./scripts/deps; else ./scripts/deps --servers-only; fi
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/failoverd ./cmd/failoverd
	$(GO) test -count=1 -timeout 0 -run '^TestPlayground$$' -v ./test/e2e -args -failoverd=$(CURDIR)/bin/failoverd $(ARGS)

SIM_SEEDS ?= 10000
.PHONY: sim
sim: ## deterministic simulation: SIM_SEEDS seeded fault histories (default 10000), then SIM_SIDECAR_SEEDS with sidecars (default a third); SIM_SEED=n replays one verbosely (SIM_SIDECARS=1: a sidecar history)
	set -o pipefail; SIM_SEEDS=$(SIM_SEEDS) $(GO) test -count=1 -timeout 10m -run '^TestSimulate$$' -v ./test/sim/ | grep -v '^=== RUN'

.PHONY: scenarios
scenarios: deps ## the real-server fault-scenario catalogue (test/e2e TestScenarios, ~2 min): one verdict line per scenario, then the table
	@set -o pipefail; rc=0; \
	  $(GO) test -count=1 -timeout 20m -run '^TestScenarios$$' -v ./test/e2e/ | grep -E '^(scenario |evidence |\||--- FAIL|FAIL|ok |PASS)' || rc=$$?; \
	  ./scripts/leftovers || rc=1; exit $$rc

clean:
	rm -rf bin
