#!/bin/sh
# Build this extension's component with componentize-py into build/.
#   COMPONENTIZE_PY  the componentize-py to run [default: the repository's .venv]
#   TOOLHOST_WIT     toolhost's wit/ directory [default: the repository's]
#   PYTHON           the python3 that renames the imports (below)
#                    [default: the one beside componentize-py, else python3]
# Then: toolhost ext seal && toolhost ext install . &&
#       toolhost ext grant fetch-py --allow-host https://api.github.com
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root="$here/../../.."
componentize=${COMPONENTIZE_PY:-$root/.venv/bin/componentize-py}
wit=${TOOLHOST_WIT:-$root/wit}
python=${PYTHON:-$(dirname "$componentize")/python3}
[ -x "$python" ] || python=python3
alias="$here/build/wit-wasx"
rm -rf "$alias"
mkdir -p "$alias/world"

# --stub-wasi turns every import named wasi:* into a trap: CPython's own
# (it would otherwise import wasi:sockets, which toolhost refuses to link),
# and the wasi:http ones of wit/world.wit alike. So the WASI packages are
# built under the alias namespace `wasx`, which the stubbing passes over, and
# the finished component's `wasx:` names become `wasi:` again below: the same
# length, so no size or offset in the binary changes.
# Each package is one file of one directory, which `-d DIR` would read as a
# single package: they are passed file by file, each after those it uses.
for package in io clocks random filesystem sockets cli http; do
    sed 's/wasi:/wasx:/g' "$wit/deps/wasi-0.2.12/$package.wit" >"$alias/$package.wit"
done
sed 's/wasi:/wasx:/g' "$here/wit/world.wit" >"$alias/world/world.wit"

# Two interfaces are called `types`: name their Python modules.
"$componentize" -d "$wit/tool" -d "$wit/host-0.1.3" \
    -d "$alias/io.wit" -d "$alias/clocks.wit" -d "$alias/random.wit" \
    -d "$alias/filesystem.wit" -d "$alias/sockets.wit" -d "$alias/cli.wit" \
    -d "$alias/http.wit" -d "$alias/world" -w example:fetch-py/fetch-tool \
    --import-interface-name toolhost:tool/types@0.1.0=types \
    --import-interface-name wasx:http/types@0.2.12=http_types \
    componentize -p "$here" app --stub-wasi -o "$alias/fetch_text.wasm"

"$python" - "$alias/fetch_text.wasm" "$here/build/fetch_text.wasm" <<'EOF'
import sys

source, target = sys.argv[1:]
with open(source, "rb") as f:
    component = f.read()
if component.count(b"wasx:") == 0:
    sys.exit(f"{source}: no wasx: import to rename")
with open(target, "wb") as f:
    f.write(component.replace(b"wasx:", b"wasi:"))
EOF
rm -rf "$alias"
