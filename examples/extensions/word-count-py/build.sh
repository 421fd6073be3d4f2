#!/bin/sh
# Build this extension's component with componentize-py into build/.
#   COMPONENTIZE_PY  the componentize-py to run [default: the repository's .venv]
#   TOOLHOST_WIT     toolhost's wit/ directory [default: the repository's]
# Then: toolhost ext seal && toolhost ext install . && toolhost ext grant word-count-py
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root="$here/../../.."
componentize=${COMPONENTIZE_PY:-$root/.venv/bin/componentize-py}
wit=${TOOLHOST_WIT:-$root/wit}
mkdir -p "$here/build"
# --stub-wasi: the component imports no WASI at all (CPython would otherwise
# import wasi:sockets, which toolhost refuses to link).
"$componentize" -d "$wit/tool" -d "$wit/host-0.1.3" -w toolhost:host/minimal-tool@0.1.3 \
    componentize -p "$here" app --stub-wasi -o "$here/build/word_count.wasm"
