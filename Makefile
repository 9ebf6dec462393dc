# MLSysOps in Go. The two commands a new user needs:
#   make up    start the whole system on this machine (after `make deps`)
#   make test  run every test: unit tests of pure logic (fakes at most) and
#              integration tests against real components (see README.md for
#              how many of each, counted by `make test-count`)
SHELL := /bin/bash
GO ?= go
STATE ?= .testbed
DESCRIPTIONS ?= descriptions
BIN ?= bin
PORT_BASE ?= 16000
# ejabberd nodes of `make up` (2 to 4: one ejabberd cluster; empty: as the
# state folder last ran, one for a new one).
XMPP_NODES ?=
# The shared testbed of integration tests (see internal/testbed/testing.go).
TEST_STATE ?= .testbed-test
TEST_PORT_BASE ?= 17000
TEST_TIMEOUT ?= 60m
# The testbed `make bench` measures (started from nothing, then stopped).
BENCH_STATE ?= .testbed-bench
BENCH_PORT_BASE ?= 18000
# Where `make bench` writes every figure (README's tables come from it).
BENCH_RESULTS ?= bench/results.json
TESTBED := $(GO) run ./cmd/testbed
BENCHFIG := $(GO) run ./cmd/benchfig
TESTCOUNT := $(GO) run ./cmd/testcount
# Documents whose marked tables come from $(BENCH_RESULTS) and the test counts.
BENCH_DOCS := README.md docs/api.md
# The scale testbed of the benchmarks on generated continua and of their
# smoke tests (test/integration/sidebyside, test/integration/scale).
SCALE_STATE ?= .testbed-scale
SCALE_PORT_BASE ?= 19000
# PROFILE=scale: `make up` on generated descriptions (SCALE_CLUSTERS
# clusters of SCALE_NODES KWOK nodes, written once into $(STATE)/descriptions)
# with light member control planes and no node agents.
PROFILE ?= default
SCALE_CLUSTERS ?= 10
SCALE_NODES ?= 1000
ifeq ($(PROFILE),scale)
DESCRIPTIONS = $(STATE)/descriptions
endif
SCALE_ENV := MLSYSOPS_SCALE_STATE=$(abspath $(SCALE_STATE)) MLSYSOPS_SCALE_PORT_BASE=$(SCALE_PORT_BASE)

.PHONY: all deps images up down status build test test-unit test-integration test-redis-modes test-count chaos bench bench-readme generate manifests verify vulncheck lint clean

all: build

## deps: install Debian packages and build the control-plane binaries into bin/ (idempotent)
deps:
	bash hack/deps.sh

## images: the project's container images (agent, agent-node, northbound, demo, pause;
## linux/amd64 and linux/arm64) as an OCI layout and archive in $(BIN)/images;
## PUSH=REGISTRY also pushes them as REGISTRY/mlsysops/<name>:<version>;
## PLATFORMS=linux/amd64 builds for those platforms only (what the testbed's
## real nodes need on this machine)
PUSH ?=
PLATFORMS ?=
images:
	$(GO) run ./cmd/images --out $(BIN)/images $(if $(PUSH),--push $(PUSH)) $(if $(PLATFORMS),--platforms $(PLATFORMS))

## up: start (or reuse) the local continuum and the MLSysOps components
## (PROFILE=scale: a generated continuum of SCALE_CLUSTERS x SCALE_NODES)
up:
ifeq ($(PROFILE),scale)
	@test -d $(DESCRIPTIONS)/nodes || $(TESTBED) gen-descriptions --out $(DESCRIPTIONS) --clusters $(SCALE_CLUSTERS) --nodes $(SCALE_NODES)
endif
	$(TESTBED) up --profile $(PROFILE) --descriptions $(DESCRIPTIONS) --state $(STATE) --port-base $(PORT_BASE) $(if $(XMPP_NODES),--xmpp-nodes $(XMPP_NODES))

## down: stop everything `make up` started
down:
	$(TESTBED) down --state $(STATE) --port-base $(PORT_BASE)

## status: one line per component
status:
	$(TESTBED) status --profile $(PROFILE) --descriptions $(DESCRIPTIONS) --state $(STATE) --port-base $(PORT_BASE)

## build: compile every package, and build the agents into $(BIN): mlsysops-agent
## (every layer), mlsysops-agent-node (node layer only, static, for node agents)
## and mlsysops-accounts (keeps the agents' XMPP accounts in place)
build:
	$(GO) build ./...
	$(GO) build -o $(BIN)/mlsysops-agent ./agents
	CGO_ENABLED=0 $(GO) build -tags nodeagent -o $(BIN)/mlsysops-agent-node ./agents
	$(GO) build -o $(BIN)/mlsysops-accounts ./cmd/mlsysops-accounts

## test: static checks, the vulnerability check, unit tests and integration tests with the race detector
## (agent processes that integration tests start are built with -race too).
## Integration packages run one after another: they share one testbed, and
## two packages' placement controllers must not act on each other's apps.
## Then the 5-minute chaos soak on the same testbed (a fixed seed's plan),
## and last the test that kills the testbed and takes it down (run there,
## not among the integration packages, so the testbed is up once).
LAST_TEST := TestKilledThenDownLeavesNothing
test: lint verify vulncheck
	@status=0; \
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v /test/integration) || status=$$?; \
	MLSYSOPS_TESTBED_STATE=$(abspath $(TEST_STATE)) MLSYSOPS_TESTBED_PORT_BASE=$(TEST_PORT_BASE) $(SCALE_ENV) \
	  $(GO) test -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) -skip '^$(LAST_TEST)$$' ./test/integration/... || status=$$?; \
	$(MAKE) --no-print-directory test-redis-modes || status=$$?; \
	$(TESTBED) down --state $(SCALE_STATE) --port-base $(SCALE_PORT_BASE) >/dev/null || true; \
	$(MAKE) --no-print-directory chaos CHAOS_DURATION=$(CHAOS_TEST_DURATION) SEED=$(CHAOS_TEST_SEED) CHAOS_TIMEOUT=$(CHAOS_TEST_TIMEOUT) CHAOS_KEEP_TESTBED=1 || status=$$?; \
	MLSYSOPS_TESTBED_STATE=$(abspath $(TEST_STATE)) MLSYSOPS_TESTBED_PORT_BASE=$(TEST_PORT_BASE) \
	  $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -run '^$(LAST_TEST)$$' ./test/integration/testbed/ || status=$$?; \
	$(TESTBED) down --state $(TEST_STATE) --port-base $(TEST_PORT_BASE) >/dev/null || true; \
	exit $$status

## test-redis-modes: the state package's integration tests and the end-to-end
## placement test through Redis again, against a Redis Sentinel group and a
## Redis Cluster (the rest of `make test` runs them against one server); each
## kills the master holding the submissions in the middle of a burst
REDIS_MODE_TESTS := -run 'Test' ./test/integration/state/
REDIS_MODE_E2E := -run 'TestPlacementAcrossRedisMasterKill' ./test/integration/placement/
test-redis-modes:
	@status=0; \
	for mode in sentinel cluster; do \
	  echo "== Redis $$mode"; \
	  MLSYSOPS_TEST_REDIS_MODE=$$mode MLSYSOPS_TESTBED_STATE=$(abspath $(TEST_STATE)) MLSYSOPS_TESTBED_PORT_BASE=$(TEST_PORT_BASE) \
	    $(GO) test -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) $(REDIS_MODE_TESTS) || status=$$?; \
	  MLSYSOPS_TEST_REDIS_MODE=$$mode MLSYSOPS_TESTBED_STATE=$(abspath $(TEST_STATE)) MLSYSOPS_TESTBED_PORT_BASE=$(TEST_PORT_BASE) \
	    $(GO) test -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) $(REDIS_MODE_E2E) || status=$$?; \
	done; \
	exit $$status

## chaos: the soak (test/integration/chaos): a steady workload through the
## test testbed while seeded faults kill, pause and restart agents and the
## testbed's components, make nodes NotReady and remove them, for
## CHAOS_DURATION (default 30m); the invariants are checked throughout and at
## the end, and every violation names the seed. SEED=N replays a run's plan of
## operations and faults. Built with the tag chaos, so only this target (and
## `make test`, for CHAOS_TEST_DURATION with CHAOS_TEST_SEED's plan, on the
## testbed the integration tests used) runs it.
CHAOS_DURATION ?= 30m
SEED ?=
# The 5-minute run in make test: a fixed plan (the seed's).
CHAOS_TEST_DURATION ?= 5m
CHAOS_TEST_SEED ?= 28001
# Its run, the settling after the last fault (up to 8 minutes) and the
# final checks included; a hang fails there, not at CI's limit.
CHAOS_TEST_TIMEOUT ?= 30m
# go test's -timeout of make chaos.
CHAOS_TIMEOUT ?= 24h
# Non-empty: leave the testbed up after the soak (make test's last test
# takes it down).
CHAOS_KEEP_TESTBED ?=
chaos:
	@status=0; \
	MLSYSOPS_CHAOS_DURATION=$(CHAOS_DURATION) MLSYSOPS_CHAOS_SEED=$(SEED) \
	MLSYSOPS_TESTBED_STATE=$(abspath $(TEST_STATE)) MLSYSOPS_TESTBED_PORT_BASE=$(TEST_PORT_BASE) \
	  $(GO) test -tags chaos -race -count=1 -p 1 -v -run '^TestChaos$$' -timeout $(CHAOS_TIMEOUT) ./test/integration/chaos/ || status=$$?; \
	$(if $(CHAOS_KEEP_TESTBED),,$(TESTBED) down --state $(TEST_STATE) --port-base $(TEST_PORT_BASE) >/dev/null || true;) \
	exit $$status

## test-unit: tests that need no testbed
test-unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v -e /test/integration -e /internal/testbed)

## test-count: count test functions by kind (unit, or integration against real
## components) and write the counts into README.md
test-count:
	$(TESTCOUNT) --write README.md

## test-integration: tests against the shared testbed (real apiservers, Karmada, ejabberd, Redis)
test-integration:
	@status=0; \
	MLSYSOPS_TESTBED_STATE=$(abspath $(TEST_STATE)) MLSYSOPS_TESTBED_PORT_BASE=$(TEST_PORT_BASE) $(SCALE_ENV) \
	  $(GO) test -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) ./test/integration/... ./internal/testbed/... || status=$$?; \
	$(TESTBED) down --state $(TEST_STATE) --port-base $(TEST_PORT_BASE) >/dev/null || true; \
	$(TESTBED) down --state $(SCALE_STATE) --port-base $(SCALE_PORT_BASE) >/dev/null || true; \
	exit $$status

## vulncheck: govulncheck (pinned, built from the module proxy) over every
## package, against vuln.go.dev when it answers and otherwise the database
## snapshot in third_party/govulndb (GOVULNDB=file:///path: another copy);
## fails on any vulnerability the code calls that is neither fixed nor
## accepted with its reason in hack/vulncheck-accepted.yaml. Part of `make test`
vulncheck:
	bash hack/vulncheck.sh

## bench: Go benchmarks (some on the shared test testbed, the side-by-side and
## the 500-application burst on the scale testbed), the testbed's time to ready
## and memory, and the scale profile's at several sizes; every figure goes to $(BENCH_RESULTS) with its command,
## time and the machine's load, and the tables of $(BENCH_DOCS) are rewritten
## from it. One run of each benchmark (-count=1), one package at a time (-p 1:
## the integration ones share a testbed, and two at once would measure each other).
bench:
	@status=0; mkdir -p $(dir $(BENCH_RESULTS)); \
	MLSYSOPS_TESTBED_STATE=$(abspath $(TEST_STATE)) MLSYSOPS_TESTBED_PORT_BASE=$(TEST_PORT_BASE) $(SCALE_ENV) \
	  $(BENCHFIG) run --out $(BENCH_RESULTS) -- $(GO) test -json -p 1 -run '^$$' -bench . -benchmem -count=1 -timeout 120m ./... || status=$$?; \
	$(TESTBED) down --state $(TEST_STATE) --port-base $(TEST_PORT_BASE) >/dev/null || true; \
	$(TESTBED) down --state $(SCALE_STATE) --port-base $(SCALE_PORT_BASE) >/dev/null || true; \
	$(BENCHFIG) run --append --out $(BENCH_RESULTS) -- $(TESTBED) bench --descriptions $(DESCRIPTIONS) --state $(BENCH_STATE) --port-base $(BENCH_PORT_BASE) || status=$$?; \
	$(BENCHFIG) run --append --out $(BENCH_RESULTS) -- $(TESTBED) scale-bench --state .testbed-scale-bench --port-base 18500 || status=$$?; \
	$(BENCHFIG) render --results $(BENCH_RESULTS) $(BENCH_DOCS) || status=$$?; \
	exit $$status

## bench-readme: rewrite the tables of $(BENCH_DOCS) from $(BENCH_RESULTS)
bench-readme:
	$(BENCHFIG) render --results $(BENCH_RESULTS) $(BENCH_DOCS)

## generate: regenerate deepcopy code and CRDs from the API types
generate:
	bash hack/generate.sh

## manifests: render deployments/manifests (GitOps) and the deployer's golden files again
manifests:
	$(GO) test ./deployments/deployer -run 'TestRenderGolden|TestManifests' -update

## verify: fail when generated files are stale (deepcopy, CRDs, the test counts
## and the benchmark tables of the documentation)
verify:
	bash hack/verify-generated.sh
	$(TESTCOUNT) --check README.md
	$(BENCHFIG) render --check --results $(BENCH_RESULTS) $(BENCH_DOCS)

## lint: gofmt, go vet (both builds) and the layering rule: no package outside
## agents/ imports an agents/ package, and the node-only agent links no
## Kubernetes, Karmada or Redis client (hack/check-imports.sh)
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags nodeagent ./...
	$(GO) vet -tags chaos ./test/integration/chaos/
	bash hack/check-imports.sh

clean:
	-$(TESTBED) down --state $(STATE) --port-base $(PORT_BASE)
	rm -rf bin $(TEST_STATE) $(BENCH_STATE) $(SCALE_STATE) .testbed-scale-bench .testbed-scale-bench-descriptions
