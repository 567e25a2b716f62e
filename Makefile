# noj-materializer — developer and operator entry points.
# `make help` lists the targets; every target documented with `## ...` shows up there.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO          ?= go
PKGS        ?= ./...
BIN         ?= bin/materializer
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X main.version=$(VERSION)

# Extra flags for `go test`, e.g. `make test TESTFLAGS=-v` (CI uses -v).
TESTFLAGS   ?=
TEST_TIMEOUT ?= 8m
# The tests allocate heavily and measure no collector: a larger GOGC trades
# memory (a few hundred MB more at peak) for about a quarter of make test's
# CPU. Benchmarks keep the default.
TEST_GOGC   ?= 400

# Pinned static checker, fetched through the Go module proxy by `go run pkg@version`
# (no install step, cached in the module and build caches after the first run).
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
# The GitHub Actions workflows' checker, pinned and fetched the same way.
ACTIONLINT_VERSION ?= v1.7.12

# Fuzzing: `make fuzz FUZZTIME=10m`; other targets: `make fuzz FUZZ=FuzzX FUZZPKG=./pkg`.
FUZZ        ?= FuzzPenalty
FUZZPKG     ?= ./materialize/penalty
FUZZTIME    ?= 2m

# Docker / compose. `docker compose` (v2 plugin) when present, else docker-compose (v1).
IMAGE       ?= noj-materializer
COMPOSE_FILE := docker/compose.yml
COMPOSE     ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
# `make up REDIS=1` also starts Redis and points the daemon at it;
# `make up MONITORING=1` also starts Prometheus with deploy/monitoring's rules.
REDIS       ?=
MONITORING  ?=
comma       := ,
PROFILES    := $(subst $(eval) ,$(comma),$(strip $(if $(REDIS),redis) $(if $(MONITORING),monitoring)))
ALL_PROFILES := redis,monitoring
COMPOSE_ENV := VERSION=$(VERSION)$(if $(PROFILES), COMPOSE_PROFILES=$(PROFILES))$(if $(REDIS), MATERIALIZER_REDIS_URL=redis://redis:6379/0)
# Port of the daemon's /metrics, /healthz, /readyz on the host (loopback only).
DEMO_HTTP   := 127.0.0.1:9464

# promtool (Debian: the prometheus package; .ci/run installs it) runs the
# alert-rule tests and the /metrics lint inside `make test`; without it they
# skip, saying so. REQUIRE_PROMTOOL=1 turns the skip into a failure.
REQUIRE_PROMTOOL ?=

export CGO_ENABLED := 1

.PHONY: help build test test-mql test-integration test-monitoring lint vet staticcheck actionlint tidy-check deps-check fuzz bench bench-integration \
        up down logs docker-build compose-config clean mutate bench-offline bench-online spin explore explore-planted

help: ## List the targets
	@echo "Usage: make <target> [VAR=value]"
	@echo
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo
	@echo "Variables: VERSION=$(VERSION) STATICCHECK_VERSION=$(STATICCHECK_VERSION) FUZZTIME=$(FUZZTIME) TESTFLAGS=$(TESTFLAGS)"

build: ## Build bin/materializer (cgo, version stamped)
	@mkdir -p $(dir $(BIN))
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/materializer

test: ## Unit, vector and simulation tests, alert-rule tests with promtool (integration tests self-skip without MongoDB)
	@command -v promtool >/dev/null 2>&1 || echo "promtool not on PATH: the alert-rule tests and the /metrics lint will skip (apt-get install --no-install-recommends prometheus, or see .ci/run)"
	@command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 || echo "docker-compose not on PATH: the Normal-OJ procedure tests will skip (apt-get install --no-install-recommends docker-compose)"
	@[ -n "$${MATERIALIZER_TEST_REDIS_ADDR:-}" ] || command -v redis-server >/dev/null 2>&1 || echo "redis-server not on PATH: the Redis cache tests will skip (apt-get install --no-install-recommends redis-server, or set MATERIALIZER_TEST_REDIS_ADDR=host:port)"
	GOGC=$(TEST_GOGC) MATERIALIZER_TEST_REQUIRE_PROMTOOL=$(REQUIRE_PROMTOOL) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TESTFLAGS) $(PKGS)

# The independent engine: the daemon over mingo (tools/mql, pinned in its
# package-lock.json; needs Node.js >= 20.19 and npm), its derived values
# against internal/reference; every statement with mongodb/'s evaluator and
# with mingo. See docs/testing.md.
MQL_DIR     := tools/mql

test-mql: $(MQL_DIR)/node_modules/.package-lock.json ## The adapter's statements under mingo: derived values vs the reference, and vs our evaluator (Node.js, npm)
	MATERIALIZER_TEST_MQL=1 $(GO) test -count=1 -run '^TestMQL' -v ./mongodb/

# npm ci (the versions package-lock.json pins) when the lock is newer than
# the installed tree; npm writes node_modules/.package-lock.json.
$(MQL_DIR)/node_modules/.package-lock.json: $(MQL_DIR)/package-lock.json
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || \
	  { echo "make test-mql needs Node.js >= 20.19 and npm (apt-get install --no-install-recommends nodejs npm)" >&2; exit 2; }
	cd $(MQL_DIR) && npm ci --no-audit --no-fund
# The Promela model of the Leader (watch/testdata/leader.pml): `make spin`
# requires spin, explores SPIN_MAXT and checks that each planted bug is
# found; `make test` runs only TestLeaderModelInStep (the model in step
# with the code), which needs no spin.
SPIN_MAXT   ?= 10

spin: ## Check the Leader's Promela model with spin at SPIN_MAXT (default 10) time units, and that it finds each planted bug (needs spin, gcc)
	MATERIALIZER_REQUIRE_SPIN=1 MATERIALIZER_SPIN_PLANTED=1 MATERIALIZER_SPIN_MAXT=$(SPIN_MAXT) $(GO) test -count=1 -v -run '^TestLeaderModel' ./watch

# -tags integration links testcontainers (containers_integration_test.go in
# mongodb/ and cmd/materializer/); `make test` builds without it, so its
# integration tests run only against MATERIALIZER_TEST_MONGODB_URI, else skip.
test-integration: ## Integration tests: need MATERIALIZER_TEST_MONGODB_URI (a replica set) or a Docker engine (-tags integration: testcontainers)
	@if [ -z "$${MATERIALIZER_TEST_MONGODB_URI:-}" ]; then \
	  echo "MATERIALIZER_TEST_MONGODB_URI is not set: the tests start a MongoDB replica set with Docker (testcontainers), or skip without an engine."; \
	  echo "  e.g. MATERIALIZER_TEST_MONGODB_URI='mongodb://127.0.0.1:27017/?directConnection=true' make test-integration"; \
	  echo "  MATERIALIZER_TEST_MONGODB_IMAGE=mongo:4.4 picks the image; MATERIALIZER_TEST_REQUIRE_MONGODB=1 fails instead of skipping."; \
	fi
	MATERIALIZER_TEST_MONGODB_URI="$${MATERIALIZER_TEST_MONGODB_URI:-}" \
	  $(GO) test -tags integration -count=1 -timeout 30m -v -run Integration $(PKGS)

lint: vet staticcheck tidy-check deps-check actionlint ## go vet + staticcheck (pinned) + go mod tidy -diff + deps-check + actionlint

# Nested modules: test-only code whose dependencies stay out of the daemon's
# module graph and out of `make test` (hashicorp/raft keeps its fuzzy tests so).
MODULES     := . deploy/monitoring

tidy-check: ## Fail when a go.mod/go.sum (root and nested modules) is not tidy: go mod tidy -diff prints what tidy would change
	@for m in $(MODULES); do echo "go mod tidy -diff ($$m)"; (cd $$m && $(GO) mod tidy -diff) || exit 1; done

# Packages `make test` must not compile: testcontainers (and its Docker client)
# only under -tags integration, github.com/prometheus/prometheus only in
# deploy/monitoring. A new integration test that imports testcontainers
# directly, without the tag, fails here: use startMongoContainer/startContainer.
HEAVY_TEST_DEPS := github.com/testcontainers/|github.com/prometheus/prometheus/

deps-check: ## Fail when make test's build links a test-only heavy dependency (HEAVY_TEST_DEPS), or the binary the in-memory store
	@if $(GO) list -deps -test $(PKGS) | grep -E '^($(HEAVY_TEST_DEPS))'; then \
	  echo "make test links the packages above: keep testcontainers behind -tags integration and PromQL in deploy/monitoring" >&2; exit 1; fi
	@if $(GO) list -deps ./cmd/materializer | grep -x 'github.com/normal-oj/noj-materializer/internal/memstore'; then \
	  echo "the materializer binary links the in-memory store: it serves tests and simulation only (offline commands stream dumps)" >&2; exit 1; fi

# The protocol explorer (watch/explore_test.go): every schedule within a
# bound, over the real engine, leader and rebuilds. `make test` runs its
# default bounds; `make explore` a larger set (EXPLORE_BOUND: bounds
# separated by ';', keys steps, writes, faults, crashes, renewals, edges,
# skew, echoes, transient).
EXPLORE_BOUND ?= steps=4,writes=1,echoes=true;steps=4,faults=1,crashes=1,skew=true;steps=2,writes=1,faults=1,crashes=1,skew=true;steps=2,writes=2;steps=3,faults=2,transient=true;steps=3,renewals=1,edges=1,skew=true

explore: ## Exhaustive exploration of the resume/lease/hand-off protocol at a larger bound (EXPLORE_BOUND; about 4 min of CPU)
	MATERIALIZER_EXPLORE_BOUND='$(EXPLORE_BOUND)' $(GO) test -count=1 -timeout 4h -run '^TestExplore$$' -v ./watch/

explore-planted: ## Plant each protocol bug of watch/testdata/planted in a copy of the tree: does the explorer find it (shortest), do the random simulations?
	watch/testdata/planted/run.sh

test-monitoring: ## The monitoring kit's PromQL checks (module deploy/monitoring: github.com/prometheus/prometheus's parser); CI runs it
	cd deploy/monitoring && $(GO) test -count=1 $(TESTFLAGS) ./...

vet: ## go vet, with and without -tags integration (the testcontainers side), and of deploy/monitoring
	$(GO) vet $(PKGS)
	$(GO) vet -tags integration $(PKGS)
	cd deploy/monitoring && $(GO) vet ./...

actionlint: ## Check .github/workflows with actionlint (pinned by ACTIONLINT_VERSION), fetched through the module proxy
	$(GO) run github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

staticcheck: ## staticcheck (honnef.co/go/tools, pinned by STATICCHECK_VERSION), fetched through the module proxy
	$(STATICCHECK) -tags integration $(PKGS)
	cd deploy/monitoring && $(STATICCHECK) ./...

fuzz: ## Fuzz the penalty evaluator for FUZZTIME (default 2m)
	$(GO) test -run '^$$' -fuzz '^$(FUZZ)$$' -fuzztime $(FUZZTIME) $(FUZZPKG)

bench: ## Benchmarks over the in-memory store (no server)
	$(GO) test -count=1 -run '^$$' -bench . -benchmem -timeout 30m $(PKGS)

# Offline benchmark: dumps are kept in BENCH_OFFLINE_DIR and reused; the online
# rebuild's before figure is built from BENCH_BASE (git archive of that revision).
BENCH_OFFLINE_DIR   ?= $(or $(TMPDIR),/tmp)/noj-offline-bench
BENCH_OFFLINE_SIZES ?= 100000,1000000,3000000
BENCH_BASE          ?= dc568c2

bench-offline: build ## verify/rebuild --dump CPU and peak RSS vs a floor reader at 100k/1M/3M submissions (seeds dumps once, ~1.5 GB disk)
	$(GO) build -o bin/offlinebench ./cmd/offlinebench
	bin/offlinebench run --dir $(BENCH_OFFLINE_DIR) --sizes $(BENCH_OFFLINE_SIZES) --bin $(BIN) --base $(BENCH_BASE)

# Online benchmark: cost per landing over the in-memory store with a modelled
# network (BENCH_ONLINE_FLAGS, e.g. --rtt 2ms --history 10,100,1000,10000,100000).
# With NOJ_BACKEND_DIR (a Normal-OJ/Back-End checkout at dfbd76a) it first
# counts the unpatched finish_judging on the same workload over mongomock
# (contrib/normal-oj-backend/costbench.sh, about a minute; Python modules from
# Debian packages like check.sh) and prints both side by side.
BENCH_ONLINE_FLAGS ?=
NOJ_BACKEND_DIR    ?=

bench-online: ## Online path per landing: round trips, bytes, staleness vs the Back-End's finish_judging (~5 min; NOJ_BACKEND_DIR=... adds the Back-End's run, ~40 s)
	$(GO) build -o bin/onlinebench ./cmd/onlinebench
	@if [ -n "$(NOJ_BACKEND_DIR)" ]; then \
	  contrib/normal-oj-backend/costbench.sh "$(NOJ_BACKEND_DIR)" bin/backend-cost.json; \
	  bin/onlinebench --backend bin/backend-cost.json $(BENCH_ONLINE_FLAGS); \
	else \
	  echo "NOJ_BACKEND_DIR is not set: the Back-End column shows recorded figures (9.4 round trips, 288 KiB read per landing), not measured here. To measure it here:"; \
	  echo "  git clone https://github.com/Normal-OJ/Back-End /tmp/Back-End && git -C /tmp/Back-End checkout dfbd76a"; \
	  echo "  make bench-online NOJ_BACKEND_DIR=/tmp/Back-End"; \
	  bin/onlinebench $(BENCH_ONLINE_FLAGS); \
	fi

bench-integration: ## End-to-end benchmarks: need MATERIALIZER_TEST_MONGODB_URI (a replica set) or Docker
	@if [ -z "$${MATERIALIZER_TEST_MONGODB_URI:-}" ]; then \
	  echo "MATERIALIZER_TEST_MONGODB_URI is not set: the benchmarks start a MongoDB replica set with Docker (testcontainers), or skip without an engine (run with -v to see why)."; \
	  echo "  e.g. MATERIALIZER_TEST_MONGODB_URI='mongodb://127.0.0.1:27017/?directConnection=true' make bench-integration"; \
	fi
	MATERIALIZER_TEST_MONGODB_URI="$${MATERIALIZER_TEST_MONGODB_URI:-}" \
	  $(GO) test -tags integration -count=1 -run '^$$' -bench Integration -benchmem -timeout 60m $(PKGS)

# Mutation testing with go-gremlins (pinned, fetched through the module proxy;
# not part of `make test` or CI). One package per run, its own tests only,
# files of subpackages excluded: `make mutate` (./materialize),
# `make mutate MUTATE_PKG=./watch` (the simulations run 100 + 50 sequences
# per mutant), `make mutate MUTATE_PKG=./materialize/penalty`. Each fits in
# under an hour on 2 cores; see docs/testing.md for scores and survivors.
# GOFLAGS=-count=1: gremlins times each mutant against its own coverage run,
# which the test cache would otherwise answer in milliseconds (every mutant
# then reads TIMED OUT). Don't pass --test-cpu: gremlins v0.6.0 hands it to go test as one argument
# ("-cpu 1"), every test run then fails and every mutant reads KILLED.
GREMLINS_VERSION ?= v0.6.0
GREMLINS    := $(GO) run github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)
MUTATE_PKG  ?= ./materialize
MUTATE_FLAGS ?= --workers 2 --timeout-coefficient 3

mutate: ## Mutation testing of MUTATE_PKG (default ./materialize; also ./watch) with go-gremlins; slow, not in CI
	GOFLAGS="$${GOFLAGS:-} -count=1" \
	MATERIALIZER_SIM_RUNS=$${MATERIALIZER_SIM_RUNS:-100} MATERIALIZER_LEASE_SIM_RUNS=$${MATERIALIZER_LEASE_SIM_RUNS:-50} \
	  $(GREMLINS) unleash $(MUTATE_FLAGS) --exclude-files '/' $(MUTATE_PKG)

docker-build: ## Build the container image noj-materializer:VERSION (needs Docker)
	@docker info >/dev/null 2>&1 || { echo "make docker-build needs a running Docker engine (docker info fails); see README 'Prerequisites'" >&2; exit 2; }
	docker build -f docker/Dockerfile --build-arg VERSION=$(VERSION) -t $(IMAGE):$(VERSION) -t $(IMAGE):latest .

up: ## Demo: MongoDB replica set + seed data + daemon on 127.0.0.1:9464 (needs Docker; REDIS=1 adds Redis, MONITORING=1 Prometheus)
	@docker info >/dev/null 2>&1 || { echo "make up needs a running Docker engine (docker info fails); see README 'Prerequisites'" >&2; exit 2; }
	$(COMPOSE_ENV) $(COMPOSE) -f $(COMPOSE_FILE) up -d --build
	@echo "materializer: http://$(DEMO_HTTP)/metrics  /healthz  /readyz   (logs: make logs)"
	@$(if $(MONITORING),echo "prometheus:   http://127.0.0.1:9090/alerts  (rules: deploy/monitoring/alerts.yml)",true)

down: ## Stop the demo and delete its data (needs Docker)
	@docker info >/dev/null 2>&1 || { echo "make down needs a running Docker engine" >&2; exit 2; }
	COMPOSE_PROFILES=$(ALL_PROFILES) $(COMPOSE) -f $(COMPOSE_FILE) down -v --remove-orphans

logs: ## Follow the demo's logs (needs Docker)
	@docker info >/dev/null 2>&1 || { echo "make logs needs a running Docker engine" >&2; exit 2; }
	$(COMPOSE) -f $(COMPOSE_FILE) logs -f --tail=100

compose-config: ## Validate docker/compose.yml without a Docker engine
	@command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 || \
	  { echo "compose-config needs docker-compose (apt-get install --no-install-recommends docker-compose) or the docker compose plugin" >&2; exit 2; }
	VERSION=$(VERSION) COMPOSE_PROFILES=$(ALL_PROFILES) $(COMPOSE) -f $(COMPOSE_FILE) config -q
	@echo "$(COMPOSE_FILE): valid"

.PHONY: compose-config-noj
compose-config-noj: ## Validate the Normal-OJ compose overlay (contrib/normal-oj-backend/compose) and the docs' procedures over fixtures, without a Docker engine
	contrib/normal-oj-backend/compose/check-config.sh
	$(GO) test -count=1 -run '^TestNOJ' ./cmd/materializer

clean: ## Remove build outputs
	rm -rf bin/ coverage.out coverage.html *.test *.prof
