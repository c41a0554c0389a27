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
GO_TEST_FLAGS ?= -race -count=1
TEST_TIMEOUT ?= 25m
# Tools the integration tier needs (real etcd + kube-apiserver); the e2e tier adds Argo CD.
INTEGRATION_TOOLS := etcd kube kwok helm controller-gen nats-server
E2E_TOOLS := etcd kube kwok helm registry argocd redis controller-gen nats-server
tools_bin = $(shell hack/tools.sh bindir $(1))
pkgs = $(foreach m,$(1),./$(m)/...)

.PHONY: help
help: ## Show this help
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z0-9_%-]+:.*## /{printf "  \033[36m%-22s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build every binary into bin/
	@mkdir -p $(BIN_DIR)
	go build -o $(BIN_DIR)/ $(foreach s,$(SERVICES) $(JOBS),./$(s)) ./cli/cmd/kubectl-aicr

.PHONY: plugin
plugin: ## Build kubectl-aicr for linux/darwin x amd64/arm64 into dist/ with a krew manifest (VERSION=v1.2.3)
	@hack/plugin.sh

.PHONY: docs-cli
docs-cli: ## Regenerate docs/cli.md from the plugin's help (a test fails when it is stale)
	go test -count=1 ./cli/internal/app -run TestCLIReferenceIsCurrent -update

.PHONY: demo
demo: build ## The main job: the local stack rolls the example GPU-stack bundle out, live; Ctrl-C stops it
	@bin=$$(hack/tools.sh bindir $(E2E_TOOLS)); \
	AICR_TOOLS_BIN=$$bin go run ./e2e/cmd/aicr-demo --bin-dir $(BIN_DIR)

.PHONY: demo-check
demo-check: build ## The demo without a terminal: exit 0 once Ready, non-zero with the blocking reason
	@bin=$$(hack/tools.sh bindir $(E2E_TOOLS)); \
	AICR_TOOLS_BIN=$$bin go run ./e2e/cmd/aicr-demo --bin-dir $(BIN_DIR) --check

.PHONY: compose-demo
compose-demo: ## With Docker: the docs/compose.md walk-through (images, kind, Argo CD, a registry, the charts, docker-compose) until Ready
	go run ./e2e/cmd/aicr-compose-demo

.PHONY: compose-demo-down
compose-demo-down: ## Stop what make compose-demo started: docker-compose, the registry container, the kind cluster
	go run ./e2e/cmd/aicr-compose-demo --down

.PHONY: tools
tools: ## Build the test and local-stack tools into the user cache (slow once, then cached)
	hack/tools.sh ensure

.PHONY: test
test: build ## Run every tier: unit, integration (real kube-apiserver) and e2e (real Argo CD)
	@start=$$SECONDS; \
	bin=$$(hack/tools.sh bindir $(E2E_TOOLS)); \
	echo "tools ready in $$((SECONDS-start))s ($$bin)"; \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 AICR_BIN_DIR=$(BIN_DIR) go test $(GO_TEST_FLAGS) -timeout $(TEST_TIMEOUT) -tags integration,e2e $(call pkgs,$(MODULES))

.PHONY: test-unit
test-unit: ## Run the unit tier (no outside processes)
	go test $(GO_TEST_FLAGS) -timeout $(TEST_TIMEOUT) $(call pkgs,$(MODULES))

.PHONY: test-integration
test-integration: ## Run unit and integration tiers (real etcd and kube-apiserver)
	@bin=$$(hack/tools.sh bindir $(INTEGRATION_TOOLS)); \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 go test $(GO_TEST_FLAGS) -timeout $(TEST_TIMEOUT) -tags integration $(call pkgs,$(MODULES))

.PHONY: e2e
e2e: build ## Run the e2e tier (real Argo CD v3.4.2 on the local stack)
	@bin=$$(hack/tools.sh bindir $(E2E_TOOLS)); \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 AICR_BIN_DIR=$(BIN_DIR) go test $(GO_TEST_FLAGS) -timeout $(TEST_TIMEOUT) -tags integration,e2e ./e2e/...

.PHONY: test-%
test-%: ## Run one module's unit tests (test-planner, test-shared, ...)
	go test $(GO_TEST_FLAGS) -timeout $(TEST_TIMEOUT) ./$*/...

.PHONY: lint
lint: ## go vet every module (with the test-tier tags)
	go vet -tags integration,e2e $(call pkgs,$(MODULES))

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
	go run ./shared/bus/cmd/gen-permissions -json deploy/charts/aicr-operator/files/nats-permissions.json \
	  -compose deploy/compose/nats.conf -doc docs/security.md

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

.PHONY: images
images: ## Build the five images, the setup Job's and the plugin's with docker (IMAGE_REGISTRY, IMAGE_TAG)
	@for b in $(SERVICES) $(JOBS); do \
	  docker build -f deploy/Dockerfile --build-arg BINARY=$$b -t $${IMAGE_REGISTRY:-aicr-operator}/$$b:$${IMAGE_TAG:-dev} .; \
	done; \
	docker build -f deploy/Dockerfile --build-arg BINARY=cli --build-arg PACKAGE=./cmd/kubectl-aicr -t $${IMAGE_REGISTRY:-aicr-operator}/kubectl-aicr:$${IMAGE_TAG:-dev} .

.PHONY: bench
bench: build ## Measure the performance figures of README.md (real kube-apiserver and NATS, no Argo CD; 6 to 15 min)
	@bin=$$(hack/tools.sh bindir $(INTEGRATION_TOOLS)); \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 AICR_BIN_DIR=$(BIN_DIR) go test -tags bench -run '^$$' -bench . -benchtime 1x -timeout 45m ./e2e/bench

.PHONY: fuzz-long
fuzz-long: ## Run each fuzz target for FUZZ_LONG_TIME (10m by default), a soak before a release
	@hack/fuzz.sh $${FUZZ_LONG_TIME:-10m}

.PHONY: chaos
chaos: build ## Rollouts while binaries, nats-server and the kube-apiserver are SIGKILLed (~5 min; CHAOS_FLAGS='-chaos.rollouts=50 -chaos.seed=7')
	@bin=$$(hack/tools.sh bindir etcd kube argocd nats-server helm); \
	AICR_TOOLS_BIN=$$bin AICR_REQUIRE_TOOLS=1 AICR_BIN_DIR=$(BIN_DIR) go test $(GO_TEST_FLAGS) -timeout $${CHAOS_TIMEOUT:-30m} -tags chaos -v ./e2e/chaos $(CHAOS_FLAGS)
