# Hermes: the two commands a newcomer needs are `make run` and `make test`.
# Go fetches the modules it needs itself; nothing else is required.

# Pebble's zstd in pure Go: no C zstd is compiled.
export GOFLAGS := -tags=pebblegozstd

GO        ?= go
DATA_DIR  ?= ./data
BIN       ?= bin/hermes
# Packages that run goroutines; they are tested with the race detector.
RACE_PKGS := ./internal/... ./pkg/...

.PHONY: run build test lint unit e2e rust bench soak fuzz fuzz-ci proto clean kafka-compat kafka-compat-ci chaos chaos-ci

run: build
	$(BIN) serve --data-dir $(DATA_DIR)

# What `hermes version` prints; a build without them says "dev"/"unknown".
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT     ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS    := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(BUILD_DATE)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/hermes

test: lint unit e2e docs-test rust python typescript sdk-interop test-deps console-test image-test k8s-validate kafka-compat-ci fuzz-ci chaos-ci

lint:
	@echo "== gofmt"; out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@echo "== go vet"; $(GO) vet ./...

unit:
	@echo "== unit tests (race detector)"
	$(GO) test -race -count=1 -timeout 10m $(RACE_PKGS)

e2e:
	@echo "== end-to-end tests (real hermes processes)"
	$(GO) test -count=1 -timeout 15m ./e2e/... ./cmd/...

# The Rust hermes-wire client: standard library only, so cargo needs no
# registry; its integration tests start bin/hermes.
rust: build
	@echo "== Rust hermes-wire client (clients/rust) against a real hermes serve"
	cd clients/rust && cargo fmt --check && HERMES_BIN=$(abspath $(BIN)) cargo test --locked

# The Python SDK (clients/python): a venv (.venv, made once) installed from
# its hashed lockfile, then its pytest suite against real hermes serve
# processes.
.PHONY: python
python: build
	@echo "== Python SDK (clients/python) against a real hermes serve"
	cd clients/python && { [ -x .venv/bin/python ] || python3 -m venv .venv; } \
		&& .venv/bin/python -m pip install -q --require-hashes -r requirements.lock \
		&& .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e . \
		&& HERMES_BIN=$(abspath $(BIN)) .venv/bin/python -m pytest -q

# The TypeScript SDK (clients/typescript): npm ci from its lockfile, tsc,
# then its node:test suite against real hermes serve processes.
.PHONY: typescript
typescript: build
	@echo "== TypeScript SDK (clients/typescript) against a real hermes serve"
	cd clients/typescript && npm ci --no-audit --no-fund && HERMES_BIN=$(abspath $(BIN)) npm test

# The three SDKs against each other (e2e/sdk_interop_test.go): a keyed
# record each of Go, Python and TypeScript produces is consumed by the
# other two on one hermes serve. It needs the venv and dist/ that the
# python and typescript targets make, and is skipped by a plain
# `go test ./e2e` (HERMES_SDK_INTEROP unset); here it must run and pass:
# the target fails unless go test reports TestSDKInterop passed.
.PHONY: sdk-interop
sdk-interop: build python typescript
	@echo "== SDK interop: Go, Python and TypeScript consume each other's records"
	@out=$$(mktemp) && trap 'rm -f "$$out"' EXIT; \
		HERMES_SDK_INTEROP=1 HERMES_INTEROP_PYTHON=$(abspath clients/python/.venv/bin/python) \
		HERMES_INTEROP_NODE="$$(command -v node)" \
		$(GO) test -count=1 -timeout 5m -run '^TestSDKInterop$$' -v ./e2e/ >"$$out" 2>&1; rc=$$?; \
		cat "$$out"; [ $$rc -eq 0 ] || exit $$rc; \
		grep -q -- '^--- PASS: TestSDKInterop ' "$$out" || { echo "sdk-interop: TestSDKInterop did not run"; exit 1; }

# The numbers and how to read them: docs/BENCHMARKS.md.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1s ./internal/partlog/ ./pkg/record/ ./internal/memring/
	$(GO) test -run '^$$' -bench PublishAckRoundTrip -benchtime 3000x ./e2e/
	$(GO) test -run '^$$' -bench PublishStream -benchtime 1000000x ./e2e/
	$(GO) test -run '^$$' -bench EndToEndLatency -benchtime 1x -count 3 ./e2e/
	$(GO) test -run '^$$' -bench PublishProtocols -benchtime 30000x ./e2e/

# franz-go's own integration suite against Hermes' Kafka listener
# (docs/KAFKA.md). NODES=3 for a 3-node cluster; SECURE=tls or
# SECURE=scram with authentication on; `make test` runs it on one node.
kafka-compat:
	NODES=$(NODES) SECURE=$(SECURE) scripts/kafka-compat.sh

kafka-compat-ci:
	@echo "== franz-go's Kafka client suite against a Hermes node"
	NODES=1 scripts/kafka-compat.sh

NODES ?= 1
SECURE ?=

# The fault campaign (docs/OPERATIONS.md, "Fault campaign"): 3 nodes in
# network namespaces of their own, faults drawn from SEED (0: from the
# clock) for DURATION, then every record checked. Needs root.
SEED ?= 0
DURATION ?= 5m
chaos: build
	$(GO) run ./cmd/hermes-chaos -bin $(BIN) -seed $(SEED) -duration $(DURATION) -out chaos-report

# `make test` runs every nemesis once, with short holds.
chaos-ci: build
	@echo "== fault campaign: every nemesis once over 3 nodes in network namespaces"
	$(GO) run ./cmd/hermes-chaos -bin $(BIN) -seed $(SEED) -rounds 1 -hold-min 2s -hold-max 4s -quiet 2s -out chaos-report

# Run each fuzz target for FUZZTIME (default 30s); `make test` runs each
# for 5s (fuzz-ci), on top of its seed corpus, which every `go test` runs.
FUZZTIME ?= 30s
# soak: a 3-node cluster under publishing and group consumption while
# nodes are killed, paused and cut off in turn, then checked record by
# record (e2e/soak_test.go). Not part of CI. SOAK=30m for longer.
SOAK ?= 10m
soak:
	HERMES_SOAK=$(SOAK) $(GO) test -run '^TestSoak$$' -count 1 -timeout 0 -v ./e2e/

fuzz-ci:
	@echo "== fuzz: every target for 5s"
	@$(MAKE) --no-print-directory fuzz FUZZTIME=5s

fuzz:
	scripts/fuzz.sh $(FUZZTIME) ./pkg/record/ FuzzValidateBatch
	scripts/fuzz.sh $(FUZZTIME) ./pkg/record/ FuzzRoundTrip
	scripts/fuzz.sh $(FUZZTIME) ./pkg/client/ FuzzDecode
	scripts/fuzz.sh $(FUZZTIME) ./internal/api/rest/ FuzzPublishBody
	scripts/fuzz.sh $(FUZZTIME) ./internal/api/rest/ FuzzCreateTopicBody
	scripts/fuzz.sh $(FUZZTIME) ./internal/api/rest/ FuzzDecodePublishFast
	scripts/fuzz.sh $(FUZZTIME) ./internal/api/graphql/ FuzzPublishInput
	scripts/fuzz.sh $(FUZZTIME) ./internal/api/graphql/ FuzzQuery
	scripts/fuzz.sh $(FUZZTIME) ./internal/api/graphql/ FuzzLeanPath
	scripts/fuzz.sh $(FUZZTIME) ./internal/api/graphql/ FuzzDecodeParams
	scripts/fuzz.sh $(FUZZTIME) ./internal/api/kafka/ FuzzRequest
	scripts/fuzz.sh $(FUZZTIME) ./internal/api/kafka/ FuzzProducedBatch
	scripts/fuzz.sh $(FUZZTIME) ./internal/api/wire/ FuzzFrames
	scripts/fuzz.sh $(FUZZTIME) ./pkg/wire/ FuzzDecoder
	scripts/fuzz.sh $(FUZZTIME) ./internal/replication/ FuzzDecodeFrame

# Container image (deploy/Containerfile; docs/OPERATIONS.md, "Deploying"):
# the static binary (CGO_ENABLED=0: no libc; -tags pebblegozstd from
# GOFLAGS) on an empty base with CA certificates and user 65532, built by
# podman from bin/image/ with nothing pulled. IMAGE names it.
IMAGE       ?= hermes:dev
PODMAN      ?= podman
# The podman settings this kind of machine needs (runc, cgroupfs, explicit
# ulimits: deploy/podman/containers.conf). PODMAN_CONF= uses the machine's.
PODMAN_CONF ?= $(abspath deploy/podman/containers.conf)

.PHONY: image image-context image-test image-deps k8s-validate
image-context:
	rm -rf bin/image && mkdir -p bin/image/data
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o bin/image/hermes ./cmd/hermes
	@if ldd bin/image/hermes >/dev/null 2>&1; then echo "bin/image/hermes is not static:"; ldd bin/image/hermes; exit 1; fi
	@[ -f /etc/ssl/certs/ca-certificates.crt ] || { echo "no /etc/ssl/certs/ca-certificates.crt (Debian: apt-get install ca-certificates)"; exit 1; }
	cp deploy/image/passwd deploy/image/group /etc/ssl/certs/ca-certificates.crt bin/image/

image: image-context
	CONTAINERS_CONF=$(PODMAN_CONF) $(PODMAN) build --layers=false --build-arg VERSION=$(VERSION) -f deploy/Containerfile -t $(IMAGE) bin/image

# The Debian packages the suite needs (Chromium for the console's browser
# tests, podman for the image test), installed when missing (root).
.PHONY: test-deps
test-deps:
	@test -x $(CHROMIUM) || { echo "== installing chromium (Debian)"; apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; }
	@{ command -v $(PODMAN) && command -v runc && command -v podman-compose; } >/dev/null 2>&1 || { echo "== installing podman (Debian)"; $(MAKE) image-deps; }

# podman and podman-compose from Debian's packages (root).
image-deps:
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(IMAGE_DEPS)
IMAGE_DEPS := podman runc conmon netavark aardvark-dns iptables podman-compose ca-certificates

# e2e/image_test.go: builds the image, runs deploy/docker-compose.yml's
# three nodes with podman-compose, kills the partition leader's container
# and reads everything back. Where podman cannot run containers the test
# is skipped, and the reason is printed in a banner.
image-test: build
	@echo "== container image: a 3-node cluster from deploy/docker-compose.yml under podman"
	@out=$$(mktemp) && trap 'rm -f "$$out"' EXIT; \
		HERMES_IMAGE_TEST=1 PODMAN=$(PODMAN) CONTAINERS_CONF=$(PODMAN_CONF) \
		$(GO) test -count=1 -timeout 20m -run '^TestImageCluster$$' -v ./e2e/ >"$$out" 2>&1; rc=$$?; \
		cat "$$out"; [ $$rc -eq 0 ] || exit $$rc; \
		if grep -q -- '^--- SKIP: TestImageCluster' "$$out"; then \
			echo; echo "######## image-test SKIPPED ########"; \
			sed -n '/image test skipped:/,/^--- SKIP/p' "$$out" | grep -v -- '^--- SKIP'; \
			echo "####################################"; \
		elif ! grep -q -- '^--- PASS: TestImageCluster ' "$$out"; then \
			echo "image-test: TestImageCluster did not run"; exit 1; \
		fi

# The Kubernetes manifests (deploy/k8s) decoded strictly into the API's Go
# types, rendered with kustomize, and checked for 3 -> 5 nodes against
# docs/OPERATIONS.md; a module of its own (deploy/k8s/validate).
k8s-validate:
	@echo "== Kubernetes manifests (deploy/k8s)"
	cd deploy/k8s/validate && $(GO) test -count=1 ./...

# Regenerate the committed protobuf code (needs protoc; installs the Go plugins).
proto:
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc --go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative \
		proto/hermes/v1/hermes.proto internal/replication/transportpb/transport.proto \
		internal/cluster/clusterpb/cluster.proto internal/broker/nodepb/node.proto

clean:
	rm -rf bin

# Every shell block of README.md, docs/*.md and clients/*/README.md runs
# as written, on a copy of the checkout against a broker of its own, or is
# annotated with why it cannot (e2e/docs_test.go). A line per file; the
# target fails unless TestDocsCommands ran and passed.
.PHONY: docs-test
docs-test:
	@echo "== docs: every shell block of README.md, docs/ and clients/*/README.md"
	@out=$$(mktemp) && rc=$$(mktemp) && trap 'rm -f "$$out" "$$rc"' EXIT; \
		{ HERMES_DOCS_TEST=1 $(GO) test -count=1 -timeout 10m -run '^TestDocs' -v ./e2e/ 2>&1; echo $$? >"$$rc"; } | tee "$$out"; \
		[ "$$(cat "$$rc")" -eq 0 ] || exit 1; \
		grep -q -- '^--- PASS: TestDocsCommands ' "$$out" || { echo "docs-test: TestDocsCommands did not run"; exit 1; }

# The web console (/ui, web/console): `make console` rebuilds its embedded
# files (internal/api/console/dist, and GraphiQL's for /graphql/ui in
# internal/api/graphql/graphiql) from package-lock.json; they are
# committed, so `make build` needs no npm.
.PHONY: console console-test
CONSOLE_DIR := web/console
CHROMIUM ?= /usr/bin/chromium

console:
	cd $(CONSOLE_DIR) && npm ci --no-audit --no-fund && npm run build

# The console in headless Chromium (Debian's chromium package; no browser
# is downloaded) against real hermes serve processes.
console-test: build
	@echo "== web console (web/console) in headless Chromium against a real hermes serve"
	@test -x $(CHROMIUM) || { echo "console-test: $(CHROMIUM) not found (apt-get install chromium, or CHROMIUM=...)"; exit 1; }
	cd $(CONSOLE_DIR) && npm ci --no-audit --no-fund \
		&& HERMES_BIN=$(abspath $(BIN)) CHROMIUM=$(CHROMIUM) npm test
