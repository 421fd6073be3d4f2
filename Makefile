# toolhost — every entry point a developer or CI needs.
# `make demo` and `make test` run `make setup` themselves.

CARGO ?= cargo
RUSTUP ?= rustup
GUEST_TARGET := wasm32-wasip2

.PHONY: setup build test conformance demo bench lint clean

## Install what the build needs: the wasm target the guest tools compile to.
setup:
	@$(RUSTUP) target list --installed | grep -qx $(GUEST_TARGET) \
		|| $(RUSTUP) target add $(GUEST_TARGET)

## Build the host, the CLI and (through build scripts) every guest component.
build: setup
	$(CARGO) build --locked

## The whole test suite: unit tests, CLI tests and the sandbox conformance suite.
test: setup
	$(CARGO) test --locked

## Only the sandbox conformance suite, printing how long each kill took.
conformance: setup
	$(CARGO) test --locked -p toolhost-conformance -- --nocapture

## The main job on the embedded defaults: list the tools, roll dice.
demo: setup
	$(CARGO) run --quiet --locked -p toolhost-cli -- tools list
	$(CARGO) run --quiet --locked -p toolhost-cli -- call dice.roll '{"formula":"3d6+4"}'
	$(CARGO) run --quiet --locked -p toolhost-cli -- call dice.roll '{"formula":"3d6++4"}' || true

## Per-call latency, start-up and kill latency (release build); see docs/benchmarks.md.
bench: setup
	$(CARGO) bench --locked -p toolhost-conformance --bench sandbox

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
