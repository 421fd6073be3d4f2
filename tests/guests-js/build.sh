#!/bin/sh
# Build the JS guests of the conformance suite into OUT_DIR/<name>/
# (tool.wasm beside its toolhost-extension.toml, ready to seal and install).
#   build.sh OUT_DIR
#   JCO     the jco to run [default: examples/extensions/fetch-js/node_modules/.bin/jco,
#           installed by `npm ci --prefix examples/extensions/fetch-js`]
#   ENGINE  quickjs (default) or spidermonkey
set -eu
[ $# -eq 1 ] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root="$here/../.."
jco=${JCO:-$root/examples/extensions/fetch-js/node_modules/.bin/jco}
engine=${ENGINE:-quickjs}
mkdir -p "$1"
out=$(cd "$1" && pwd)
# The world is toolhost:host's minimal-tool (log only), resolved against
# toolhost:tool in deps/.
wit="$out/wit"
rm -rf "$wit"
mkdir -p "$wit/deps/toolhost-tool"
cp "$root"/wit/host-0.1.4/*.wit "$wit/"
cp "$root"/wit/tool/*.wit "$wit/deps/toolhost-tool/"
case $engine in
    # Without --backend-qjs-disable-async the component uses the
    # component-model async ABI, which toolhost does not enable.
    quickjs) engine_flags="--backend quickjs --backend-qjs-disable-async" ;;
    # Only the world's imports: no WASI stdio, random, clocks, http.
    spidermonkey) engine_flags="--backend starlingmonkey -d stdio random clocks http fetch-event" ;;
    *) echo "ENGINE must be quickjs or spidermonkey" >&2; exit 2 ;;
esac
for guest in spin membomb preinit; do
    mkdir -p "$out/$guest"
    cp "$here/$guest/toolhost-extension.toml" "$out/$guest/"
    # shellcheck disable=SC2086
    "$jco" componentize "$here/$guest/tool.js" --cwd "$here/$guest" -w "$wit" -n minimal-tool \
        $engine_flags -o "$out/$guest/tool.wasm"
done
