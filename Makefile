# aicr-operator: the only entry point for build, test, lint and run.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

MODULES := $(shell sed -n 's#^[[:space:]]*\./\([a-z0-9-]*\)$$#\1#p' go.work)
SERVICES := planner applier readiness credrefresher admission
# The chart's setup Job (pre-install, pre-upgrade): the Secrets helm template cannot render.
JOBS := setup
BIN_DIR ?= $(CURDIR)/bin
# -trimpath: the compiled packages' cache keys then leave out the checkout's folder, so a fresh
# clone elsewhere (CI's) reuses what an earlier clone compiled instead of compiling and linking
# every package of the workspace again (one e2e package's test binary: 16 CPU-seconds in a new
# clone without it, 1.4 with it, 2026-12-08). The binaries are built with it already.
GO_TEST_FLAGS ?= -race -count=1 -trimpath
TEST_TIMEOUT ?= 25m
# The tools (hack/tools.sh names) each target starts, and no more: the local stack runs etcd, the
# three kube binaries (kwok needs the controller-manager and the scheduler), kwok, Argo CD's
# controller and repo-server (with redis) and the registry, and renders the chart's RBAC with helm;
# the tests add nats-server (the chart's NATS, e2e/charttest), docker-compose (e2e/deploy), promtool
# (the chart's alert rules, e2e/edges) and gcc (cgo, for -race); bench and chaos run only the apiserver, chaos a cluster of nats-server processes.
DEMO_TOOLS := etcd kube kwok helm registry argocd redis
TEST_TOOLS := $(DEMO_TOOLS) nats-server docker-compose promtool gcc
INTEGRATION_TOOLS := etcd kube kwok helm registry nats-server docker-compose gcc
BENCH_TOOLS := etcd kube-apiserver gcc
CHAOS_TOOLS := etcd kube-apiserver nats-server helm gcc
# make chaos: rollouts after the install (more while a fault kind is below -chaos.min-faults),
# the seed of bundle changes, approvals and faults (0: the clock), a wall-time limit (0: none).
CHAOS_ROLLOUTS ?= 20
CHAOS_SEED ?= 0
CHAOS_DURATION ?= 0
# and more rollouts while a fault kind has fewer stall measurements than CHAOS_MIN_STALLS.
CHAOS_MIN_STALLS ?= 3
# make chaos-argocd: the variant with real Argo CD (kwok runs the pods, charts come from the
# registry), so the e2e stack's tools besides nats-server; rollouts after the install.
CHAOS_ARGOCD_TOOLS := $(DEMO_TOOLS) nats-server gcc
CHAOS_ARGOCD_ROLLOUTS ?= 6
pkgs = $(foreach m,$(1),./$(m)/...)
BIN_PKGS := $(foreach s,$(SERVICES) $(JOBS),./$(s)) ./cli/cmd/kubectl-aicr
# The version and revision every binary reports (servicekit/buildinfo, stamped at link time):
# the latest v* tag git describe finds, else dev.
VERSION ?= $(shell git describe --tags --match 'v*' 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILDINFO := github.com/aicr-run/aicr-operator/servicekit/buildinfo
LDFLAGS := -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).revision=$(REVISION)
# build_cmd PKGS: with the images' build flags (e2e/imagebuild), which are also the tools', so
# the standard library compiles once for both (-ldflags changes only the link)
build_cmd = CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN_DIR)/ $(1)
# tools_bin TOOLS,PKGS: build the missing tools and, beside them, the binaries of PKGS (their
# modules download with the tools'); print the tools' folder
tools_bin = mkdir -p $(BIN_DIR) && hack/tools.sh bindir --with "binaries=$(call build_cmd,$(2))" --fetch "binaries=go list -deps $(2) >/dev/null" $(1)
# RACE_BIN_DIR: the binaries the e2e tier and chaos run, built with the race detector (cgo on;
# gcc, which the run it is a job of may still be installing: it waits for that). Their tests fail
# on a race report in any process's log. The images, make build and the benchmarks stay static.
RACE_BIN_DIR := $(BIN_DIR)/race
race_build_cmd = mkdir -p $(RACE_BIN_DIR) && hack/tools.sh ensure gcc >&2 && CGO_ENABLED=1 go build -race -trimpath -ldflags '$(LDFLAGS)' -o $(RACE_BIN_DIR)/ $(1)
# race_tools_bin TOOLS,PKGS: tools_bin with the binaries of PKGS race-built into RACE_BIN_DIR
race_tools_bin = mkdir -p $(BIN_DIR) && hack/tools.sh bindir --with "race binaries=$(call race_build_cmd,$(2))" --fetch "race binaries=go list -deps $(2) >/dev/null" $(1)

.PHONY: help
help: ## Show this help
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z0-9_%-]+:.*## /{printf "  \033[36m%-22s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build every binary into bin/
	@mkdir -p $(BIN_DIR)
	$(call build_cmd,$(BIN_PKGS))

.PHONY: plugin
plugin: ## Build kubectl-aicr for linux/darwin/windows x amd64/arm64 as archives into dist/plugin with a krew manifest and SHA256SUMS (VERSION=v1.2.3)
	go run ./e2e/cmd/aicr-images plugin --out dist/plugin --version $(VERSION)

.PHONY: docs-cli
docs-cli: ## Regenerate docs/cli.md from the plugin's help (a test fails when it is stale)
	go test -count=1 ./cli/internal/app -run TestCLIReferenceIsCurrent -update

# make demo BUNDLE=examples/aicr-bundle: an AICR bundle folder (what aicr bundle writes),
# imported with kubectl aicr bundle import, instead of the example bundle.
BUNDLE ?=
demo_bundle = $(if $(BUNDLE),--bundle $(BUNDLE))

.PHONY: demo
demo: ## The main job: the local stack rolls the example GPU-stack bundle out, live (BUNDLE=examples/aicr-bundle: an AICR bundle folder); Ctrl-C stops it
	@bin=$$($(call tools_bin,$(DEMO_TOOLS),$(BIN_PKGS) ./e2e/cmd/aicr-demo)); \
	AICR_TOOLS_BIN=$$bin $(BIN_DIR)/aicr-demo --bin-dir $(BIN_DIR) $(demo_bundle)

.PHONY: demo-check
demo-check: ## The demo without a terminal: exit 0 once Ready, non-zero with the blocking reason (BUNDLE= as for demo)
	@bin=$$($(call tools_bin,$(DEMO_TOOLS),$(BIN_PKGS) ./e2e/cmd/aicr-demo)); \
	AICR_TOOLS_BIN=$$bin $(BIN_DIR)/aicr-demo --bin-dir $(BIN_DIR) --check $(demo_bundle)

.PHONY: compose-demo
compose-demo: ## With Docker: the whole system as containers of images built here (docs/compose.md), the example bundle rolled out live; Ctrl-C removes it
	@$(call build_cmd,./cli/cmd/kubectl-aicr)
	go run ./e2e/cmd/aicr-compose-demo --bin-dir $(BIN_DIR)

.PHONY: compose-demo-check
compose-demo-check: ## compose-demo without a terminal: exit 0 once Ready, non-zero with the blocking reason; docker-compose down -v either way
	@$(call build_cmd,./cli/cmd/kubectl-aicr)
	go run ./e2e/cmd/aicr-compose-demo --bin-dir $(BIN_DIR) --check

.PHONY: compose-e2e
compose-e2e: ## With Docker: a rollout on the compose stack through real faults (a NATS node disconnected, the planner leader paused, an applier restarted; e2e/compose)
	go test -count=1 -trimpath -p 1 -timeout 40m -tags compose -v ./e2e/compose

.PHONY: compose-demo-down
compose-demo-down: ## Remove what make compose-demo left running (docker-compose down -v)
	go run ./e2e/cmd/aicr-compose-demo --down

.PHONY: tools
tools: ## Build every tool into the user cache and install the Debian packages the tests run (slow once)
	hack/tools.sh ensure

# NORACE_PKGS: the image builder's and the release's tests, run without the race detector: they
# gzip every image layer of both platforms (about 640 MB) in the test process, which the race
# detector makes several times slower (minutes of make test), and the code they drive is the build
# tooling, not the operator's (whose binaries they do not run race-built anyway). They run beside
# the race-built packages, their output held back until those end: the e2e packages leave much of
# the CPU idle while they wait for Argo CD or for a timer, and these two fill it.
# On a fresh machine they compile every dependency for linux/arm64 (the images) and the plugin's
# for darwin and windows too, with nothing in Go's build cache: over 25 min on a loaded 2-core
# machine (2026-12-07: the arm64 images 7 min 51 s, then the plugin's windows/arm64 build was
# still running at the release's old 25-minute bound). NORACE_TEST_TIMEOUT gives that first run
# room; a warm run takes 2 min.
NORACE_PKGS := ./e2e/imagebuild/... ./e2e/release/...
NORACE_TEST_TIMEOUT ?= 60m
norace_filter := -e '/e2e/imagebuild$$' -e '/e2e/imagebuild/' -e '/e2e/release$$' -e '/e2e/release/'
# TEST_P: the packages make test builds and runs at once (go test -p; Go's default is the number
# of cores). At 2 on a 2-core machine the e2e phase left 20 to 60 % of the CPU idle (vmstat,
# 2026-12-08): each package's stack mostly waits, for Argo CD's syncs, kwok's pods or the timer a
# test is about. Each e2e stack holds about 2 GB.
TEST_P ?= 3
# SLOW_FIRST: the longest packages (2026-12-08, race-built, at -p 2: edges 190 s, credentials
# 160 s, chaos and leavealone 114 s, lifecycle 92 s), started first so that none of them runs
# alone at the end of make test; the rest follow in go list's order.
SLOW_FIRST := ./e2e/edges ./e2e/credentials ./e2e/chaos ./e2e/leavealone ./e2e/lifecycle

.PHONY: test
test: ## Run every tier: unit, integration (real kube-apiserver) and e2e (real Argo CD, race-built binaries)
	@start=$$SECONDS; \
	bin=$$($(call race_tools_bin,$(TEST_TOOLS),$(BIN_PKGS))); \
	echo "tools and race-built binaries ready in $$((SECONDS-start))s ($$bin)"; \
	slow=$$(go list -tags integration,e2e $(SLOW_FIRST)); \
	pkgs=$$(go list -tags integration,e2e $(call pkgs,$(MODULES)) | grep -v $(norace_filter) | grep -vxF "$$slow"); \
	norace=$$(mktemp); trap 'rm -f "$$norace"' EXIT; \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 AICR_BIN_DIR=$(RACE_BIN_DIR) go test $(filter-out -race,$(GO_TEST_FLAGS)) -timeout $(NORACE_TEST_TIMEOUT) -tags integration,e2e $(NORACE_PKGS) >"$$norace" 2>&1 & \
	norace_pid=$$!; \
	rc=0; \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 AICR_BIN_DIR=$(RACE_BIN_DIR) go test -p $(TEST_P) $(GO_TEST_FLAGS) -timeout $(TEST_TIMEOUT) -tags integration,e2e $$slow $$pkgs || rc=$$?; \
	echo "make test: the race-built packages ended after $$((SECONDS-start))s; the packages without -race:"; \
	wait $$norace_pid || rc=$$?; \
	cat "$$norace"; \
	echo "make test: $$((SECONDS-start))s"; \
	exit $$rc

.PHONY: test-unit
test-unit: ## Run the unit tier (no outside processes)
	@hack/tools.sh ensure gcc
	go test $(GO_TEST_FLAGS) -timeout $(TEST_TIMEOUT) $(call pkgs,$(MODULES))

.PHONY: test-integration
test-integration: ## Run unit and integration tiers (real etcd and kube-apiserver)
	@bin=$$(hack/tools.sh bindir $(INTEGRATION_TOOLS)); \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 go test $(GO_TEST_FLAGS) -timeout $(TEST_TIMEOUT) -tags integration $(call pkgs,$(MODULES))

.PHONY: e2e
e2e: ## Run the e2e tier (real Argo CD v3.4.2 on the local stack, race-built binaries)
	@bin=$$($(call race_tools_bin,$(TEST_TOOLS),$(BIN_PKGS))); \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 AICR_BIN_DIR=$(RACE_BIN_DIR) go test $(GO_TEST_FLAGS) -timeout $(TEST_TIMEOUT) -tags integration,e2e ./e2e/...

.PHONY: test-%
test-%: ## Run one module's unit tests (test-planner, test-shared, ...)
	@hack/tools.sh ensure gcc
	go test $(GO_TEST_FLAGS) -timeout $(TEST_TIMEOUT) ./$*/...

# make lint: golangci-lint (.golangci.yml: go vet's checks, staticcheck, revive, errcheck, gosec,
# misspell, importas) over every module of go.work with the test tiers' tags, then the packages
# behind their own tags (benchmarks, chaos) with theirs. LINT_FLAGS=--fix applies the fixes the
# linters know.
LINT_FLAGS ?=
.PHONY: lint
lint: ## golangci-lint every module (with the test-tier tags), and the benchmarks and chaos with theirs
	@gl=$$(hack/tools.sh bindir golangci-lint)/golangci-lint; \
	$$gl run --allow-serial-runners $(LINT_FLAGS) --build-tags integration,e2e $(call pkgs,$(MODULES)); \
	$$gl run --allow-serial-runners $(LINT_FLAGS) --build-tags bench ./e2e/bench/...; \
	$$gl run --allow-serial-runners $(LINT_FLAGS) --build-tags benchargocd ./e2e/benchargocd/...; \
	$$gl run --allow-serial-runners $(LINT_FLAGS) --build-tags chaos ./e2e/chaos/...; \
	$$gl run --allow-serial-runners $(LINT_FLAGS) --build-tags compose ./e2e/compose/...

.PHONY: fuzz
fuzz: ## Run each fuzz target (FUZZTIME=60s by default)
	@hack/fuzz.sh $${FUZZTIME:-60s}

.PHONY: generate
generate: ## Regenerate deep-copy code and CRD YAML from shared/api, deep-copy code of shared/argoapp, the NATS permissions of the chart and docs/security.md
	@cg=$$(hack/tools.sh bindir controller-gen)/controller-gen; \
	cd shared && $$cg object:headerFile=/dev/null paths=./api/... && \
	$$cg object:headerFile=/dev/null paths=./argoapp/... && \
	$$cg crd:crdVersions=v1 paths=./api/... output:crd:artifacts:config=api/crds
	cp shared/api/crds/*.yaml deploy/charts/aicr-operator/files/crds/
	go run ./shared/bus/cmd/gen-permissions -json deploy/charts/aicr-operator/files/nats-permissions.json -doc docs/security.md

.PHONY: verify
verify: ## Fail when generated files are stale, modules untidy, walls crossed, paths or import names off
	@hack/verify.sh

.PHONY: docs-images
docs-images: ## Rewrite docs/modules.dot and docs/modules.svg, render docs/images/example-rollout.png (installs graphviz if missing)
	@hack/docs-images.sh

.PHONY: tidy
tidy: ## go mod tidy every module, then go work sync
	@for m in $(MODULES); do (cd $$m && GOWORK=off go mod tidy); done; go work sync

.PHONY: chart-lint
chart-lint: ## helm lint and helm template the aicr-operator chart, and every example values file under deploy/ against its schema
	@helm=$$(hack/tools.sh bindir helm)/helm; chart=deploy/charts/aicr-operator; \
	$$helm lint $$chart --strict --kube-version 1.34.0 --set registry.repository=registry.example.com/aicr; \
	$$helm template aicr-operator $$chart -n aicr-system --kube-version 1.34.0 --set registry.repository=registry.example.com/aicr >/dev/null; \
	for f in $$(find deploy -name '*.yaml' -path '*/values/*' | sort); do \
	  $$helm lint $$chart --strict --kube-version 1.34.0 -f $$f >/dev/null || { echo "chart-lint: $$f does not meet values.schema.json:"; $$helm lint $$chart --strict --kube-version 1.34.0 -f $$f; exit 1; }; \
	  $$helm template aicr-operator $$chart -n aicr-system --kube-version 1.34.0 -f $$f >/dev/null; \
	  echo "chart-lint: $$f ok"; \
	done; \
	echo "chart-lint: ok"

# make images: the OCI layout of every image (IMAGES_DIR); REGISTRY=host:port/prefix also pushes
# each as <REGISTRY>/<binary>:<VERSION> and prints its digest. make images-load loads this
# machine's platform into Docker as <IMAGE_REPOSITORY>/<binary>:<IMAGE_TAG>.
IMAGES_DIR ?= $(CURDIR)/build/images/oci
REGISTRY ?=
IMAGE_REPOSITORY ?= aicr-operator
IMAGE_TAG ?= dev

.PHONY: images
images: ## Build the images of the five binaries, the setup Job and the plugin for linux/amd64 and arm64 without Docker: an OCI layout in build/images/oci (REGISTRY=host:port/prefix pushes them and prints their digests)
	go run ./e2e/cmd/aicr-images build --out $(IMAGES_DIR) --version $(VERSION) --revision $(REVISION) $(if $(REGISTRY),--push $(REGISTRY))

.PHONY: images-load
images-load: images ## make images, then load this machine's platform of each into Docker as aicr-operator/<binary>:dev (IMAGE_REPOSITORY, IMAGE_TAG)
	go run ./e2e/cmd/aicr-images load --out $(IMAGES_DIR) --repository $(IMAGE_REPOSITORY) --tag $(IMAGE_TAG)

# make release VERSION=v0.2.0 REGISTRY=registry.example.com/aicr: every image pushed to
# <REGISTRY>/<binary>:<VERSION>, the chart naming them by digest pushed to
# oci://<REGISTRY>/charts/aicr-operator, the plugin's archives and krew manifest, the release
# notes and SHA256SUMS in dist/<VERSION> (e2e/release; docs/install.md#releases).
.PHONY: release
release: ## Publish a release without Docker: images by digest, the OCI chart naming them, the plugin's archives and krew manifest, SHA256SUMS (VERSION=v0.2.0 REGISTRY=host/prefix)
	@[ -n "$(REGISTRY)" ] || { echo "release: set REGISTRY to host[:port]/prefix (REGISTRY=registry.example.com/aicr)"; exit 2; }
	@helm=$$(hack/tools.sh bindir helm)/helm; \
	go run ./e2e/cmd/aicr-images release --out dist/$(VERSION) --version $(VERSION) --registry $(REGISTRY) --helm $$helm

# make release-check: e2e/release's TestReleaseInstallsWithArgoCDByDigest alone (make test runs it
# too): a release to the local registry (images for both platforms, the chart, the plugin's six
# archives), then real Argo CD installs the operator from that OCI chart by digest, with the
# Application docs/install.md shows. Its images are e2e/imagebuild's tests' (one build per
# checkout state, kept in the user cache: imagebuild.Shared).
.PHONY: release-check
release-check: ## Release to a local registry and have real Argo CD install the chart from it, by digest, as docs/install.md says (also in make test)
	@bin=$$($(call tools_bin,$(TEST_TOOLS),$(BIN_PKGS))); \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 go test -count=1 -timeout 60m -tags e2e -v -run TestReleaseInstallsWithArgoCDByDigest ./e2e/release

# The whole of make bench takes about 25 min on a fast 2-vCPU machine and about twice that on a
# slow one; its report prints at the end, so a timeout loses every figure.
BENCH_TIMEOUT ?= 150m
.PHONY: bench
bench: ## Measure the performance figures of README.md, each the median of 3 runs (real kube-apiserver and NATS, no Argo CD; BENCH_FLAGS=-bench.reps=5)
	@bin=$$($(call tools_bin,$(BENCH_TOOLS),$(BIN_PKGS))); \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 AICR_BIN_DIR=$(BIN_DIR) go test -tags bench -run '^$$' -bench . -benchtime 1x -timeout $(BENCH_TIMEOUT) ./e2e/bench $(BENCH_FLAGS)

# make bench-compare BASE=f777d7e: the 30-release overhead of bin/'s binaries beside BASE's,
# alternating per repetition (BENCH_FLAGS=-bench.reps=9 for more). COMPARE=Readiness10000:
# readiness's start and refresh at 10 000 Applications instead (BENCH_FLAGS=-bench.readiness=small
# for the small values only).
BASE ?=
COMPARE ?= RolloutOverhead30
.PHONY: bench-compare
bench-compare: ## The 30-release overhead (or COMPARE=Readiness10000) against another commit's binaries (BASE=<commit>), alternating per repetition: the paired ratio
	@[ -n "$(BASE)" ] || { echo "bench-compare: set BASE to the commit to compare with (BASE=f777d7e)"; exit 2; }
	@base=$$(hack/bench-base.sh $(BASE)); \
	bin=$$($(call tools_bin,$(BENCH_TOOLS),$(BIN_PKGS))); \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 AICR_BIN_DIR=$(BIN_DIR) go test -tags bench -run '^$$' -bench '^Benchmark$(COMPARE)$$' -benchtime 1x -timeout $(BENCH_TIMEOUT) ./e2e/bench -bench.compare=$$base $(BENCH_FLAGS)

.PHONY: bench-argocd
bench-argocd: ## The figure users feel: the operator against the event-driven floor on real Argo CD v3.4.2 (local stack; about 10 min)
	@bin=$$($(call tools_bin,$(DEMO_TOOLS),$(BIN_PKGS))); \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 AICR_BIN_DIR=$(BIN_DIR) go test -tags benchargocd -run '^$$' -bench . -benchtime 1x -timeout 60m ./e2e/benchargocd $(BENCH_FLAGS)

.PHONY: fuzz-long
fuzz-long: ## Run each fuzz target for FUZZ_LONG_TIME (10m by default), a soak before a release
	@hack/fuzz.sh $${FUZZ_LONG_TIME:-10m}

.PHONY: chaos
chaos: ## Rollouts under the fault model of docs/testing.md, race-built binaries (~3 min; CHAOS_ROLLOUTS=100 CHAOS_SEED=7 CHAOS_DURATION=20m CHAOS_FLAGS=...)
	@bin=$$($(call race_tools_bin,$(CHAOS_TOOLS),$(BIN_PKGS))); \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 AICR_BIN_DIR=$(RACE_BIN_DIR) go test $(GO_TEST_FLAGS) -timeout $${CHAOS_TIMEOUT:-90m} -tags chaos -v ./e2e/chaos \
	  -chaos.rollouts=$(CHAOS_ROLLOUTS) -chaos.seed=$(CHAOS_SEED) -chaos.duration=$(CHAOS_DURATION) -chaos.min-stalls=$(CHAOS_MIN_STALLS) $(CHAOS_FLAGS)

.PHONY: chaos-argocd
chaos-argocd: ## make chaos through real Argo CD v3.4.2: slow syncs, broken charts, Argo CD killed too (-chaos.argocd; CHAOS_ARGOCD_ROLLOUTS=6 CHAOS_SEED=7 CHAOS_FLAGS=...)
	@bin=$$($(call race_tools_bin,$(CHAOS_ARGOCD_TOOLS),$(BIN_PKGS))); \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 AICR_BIN_DIR=$(RACE_BIN_DIR) go test $(GO_TEST_FLAGS) -timeout $${CHAOS_TIMEOUT:-90m} -tags chaos -v ./e2e/chaos \
	  -run TestRolloutsWithArgoCDUnderFaults -chaos.argocd -chaos.rollouts=$(CHAOS_ARGOCD_ROLLOUTS) -chaos.seed=$(CHAOS_SEED) -chaos.duration=$(CHAOS_DURATION) $(CHAOS_FLAGS)
