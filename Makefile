# SIG — make targets. `make demo` and `make test` do all set-up on a fresh machine.
SHELL := /bin/bash
BIN   := $(CURDIR)/bin
GO    ?= go
export PATH := $(BIN):$(PATH)

PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
MINIO_VERSION              := v0.0.0-20260212201848-7aac2a2c5b7c
GRPCURL_VERSION            := v1.9.3

# Tests use a long timeout: the reliability tests kill and restart real processes.
TEST_FLAGS ?= -timeout 30m
ARGS ?=

.PHONY: all deps proto build test python-venv python-test python-bounds python-proto bench demo fmt vet clean

all: build

## deps: install every tool the build and the tests use, pinned, into bin/ (protoc via apt-get).
deps: $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/minio $(BIN)/grpcurl protoc chromium

protoc:
	@command -v protoc >/dev/null 2>&1 || { echo "installing protobuf-compiler (apt-get)"; \
	  (apt-get install -y protobuf-compiler || (apt-get update && apt-get install -y protobuf-compiler)) >/dev/null; }

# Debian's Chromium drives the web UI browser tests (chromedp).
chromium:
	@command -v chromium >/dev/null 2>&1 || { echo "installing chromium (apt-get)"; \
	  (apt-get install -y chromium || (apt-get update && apt-get install -y chromium)) >/dev/null; }

$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

# MinIO is a Go program; the first install takes a few minutes.
$(BIN)/minio:
	@echo "installing MinIO $(MINIO_VERSION) into bin/ (a few minutes the first time)"
	GOBIN=$(BIN) $(GO) install github.com/minio/minio@$(MINIO_VERSION)

$(BIN)/grpcurl:
	GOBIN=$(BIN) $(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

## proto: regenerate the committed gRPC/protobuf code.
proto: protoc $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc
	protoc --proto_path=proto --plugin=protoc-gen-go=$(BIN)/protoc-gen-go --plugin=protoc-gen-go-grpc=$(BIN)/protoc-gen-go-grpc \
	  --go_out=. --go_opt=module=github.com/sigdata/sig \
	  --go-grpc_out=. --go-grpc_opt=module=github.com/sigdata/sig \
	  $$(find proto -name '*.proto' | sort)

## build: compile everything and put the commands in bin/.
build:
	$(GO) build ./...
	GOBIN=$(BIN) $(GO) install ./cmd/...

## test: all tests, against a real MinIO, kfake and Chromium (installed first), then the Python client's.
test: deps
	$(GO) vet ./...
	$(GO) test $(TEST_FLAGS) ./...
	$(MAKE) python-test
	$(MAKE) python-bounds

# The Python client's environment: a venv inside the repository (.venv,
# git-ignored) with exactly python/requirements.lock from PyPI, and the
# package itself installed editable (pip install -e ./python, built with the
# lock's setuptools). Made anew when the lock or pyproject.toml changes.
# --no-compile: Python compiles what is imported on first use, not all of
# JAX and SciPy up front (about half the install's time on 2 busy cores).
PYTHON ?= python3.11
VENV   := $(CURDIR)/.venv
$(VENV)/.installed: python/requirements.lock python/pyproject.toml
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-compile -r python/requirements.lock
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e ./python
	touch $@

## python-venv: the Python client's pinned environment in .venv.
python-venv: $(VENV)/.installed

## python-test: the Python client's tests (python/tests) against a real sigd dev and readers built from this tree.
python-test: $(VENV)/.installed $(BIN)/minio
	cd python && SIG_MINIO_BIN=$${SIG_MINIO_BIN:-$(BIN)/minio} $(VENV)/bin/python -m pytest -q -p no:cacheprovider tests

## python-bounds: pip install ./python in fresh venvs at both ends of its dependency ranges (the newest pyarrow, every lower bound), and a subset of the tests in each.
python-bounds: $(BIN)/minio
	PYTHON=$(PYTHON) SIG_MINIO_BIN=$${SIG_MINIO_BIN:-$(BIN)/minio} python/bounds.sh

## python-proto: regenerate the Python client's committed gRPC stubs (grpcio-tools, pinned).
python-proto: $(VENV)/.installed
	$(VENV)/bin/pip install -q --disable-pip-version-check grpcio-tools==1.85.1
	PY=$(VENV)/bin/python python/gen_proto.sh

## bench: benchmarks; reports are written under bench/.
bench: deps build
	./bench/run.sh

## demo: the main job end to end on embedded defaults.
demo: deps build
	$(BIN)/sigctl demo $(ARGS)

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '\.pb\.go$$')

vet:
	$(GO) vet ./...

clean:
	rm -rf $(BIN)
