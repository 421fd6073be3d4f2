// Build build/tool.wasm from src/tool.js with QuickJS (componentize-qjs,
// through jco's own dependencies: rolldown and componentize-qjs).
//
// Why not `jco componentize` as the template does: componentize-qjs 0.4.5
// cannot pre-initialize a component that imports wasi:http. Its build-time
// linker gives wasi:io real WASI but stubs wasi:http/types separately, and
// the two `input-stream` resource types then mismatch ("instance export
// `input-stream` has the wrong type"). So, as examples/extensions/fetch-py
// does for componentize-py, the build runs under another name:
//   1. bundle src/tool.js and @toolhost/guest into one module, then rename
//      its `wasi:` import specifiers to `wasx:` (same length);
//   2. build against a copy of the WASI WIT renamed to `wasx:`, with
//      --stub-wasi: the engine's own WASI imports (stdio, clocks, random,
//      environment) become traps, and `wasx:` is stubbed consistently;
//   3. in the finished component rename the stubs' internal `wasi:` names
//      to `wasy:`, then `wasx:` back to `wasi:` (same lengths, so no size or
//      offset changes): the imports are exactly the world's wasi:http ones.
// Consequence of step 2: console.log, Date.now() and Math.random() trap in
// a call. Use @toolhost/guest/log, /clock and /random (recorded, replayable).
//
//   TOOLHOST_WIT  toolhost's wit/ directory [default: the repository's]
import { mkdir, readFile, rm, writeFile, cp } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rolldown } from 'rolldown';
import { componentize } from 'componentize-qjs';

const here = dirname(fileURLToPath(import.meta.url));
const wit = resolve(process.env.TOOLHOST_WIT ?? join(here, '../../../wit'));
const out = join(here, 'build');
const witOut = join(out, 'wit');
const WASI_PACKAGES = ['io', 'clocks', 'random', 'filesystem', 'sockets', 'cli', 'http'];

await rm(witOut, { recursive: true, force: true });
await mkdir(join(witOut, 'deps'), { recursive: true });
await cp(join(wit, 'tool'), join(witOut, 'deps/toolhost-tool'), { recursive: true });
await cp(join(wit, 'host-0.1.4'), join(witOut, 'deps/toolhost-host'), { recursive: true });
const toWasx = (text) => text.replaceAll('wasi:', 'wasx:');
for (const name of WASI_PACKAGES) {
  const text = await readFile(join(wit, 'deps/wasi-0.2.12', `${name}.wit`), 'utf8');
  await writeFile(join(witOut, 'deps', `wasx-${name}.wit`), toWasx(text));
}
await writeFile(join(witOut, 'world.wit'), toWasx(await readFile(join(here, 'wit/world.wit'), 'utf8')));

const bundle = await rolldown({
  input: join(here, 'src/tool.js'),
  external: [/^(wasi|toolhost):/],
  logLevel: 'warn',
});
const { output } = await bundle.generate({ format: 'esm' });
await bundle.close();
// Only import specifiers are renamed: `from "wasi:...`, and `import "wasi:...`
// where tree-shaking left an import for its side effects only.
const source = output[0].code.replace(/((?:from|import)\s*["'])wasi:/g, '$1wasx:');

const { component } = await componentize({
  witPath: witOut,
  jsSource: source,
  world: 'fetch-tool',
  sync: true,
  stubWasi: true,
});
const bytes = Buffer.from(component);
const renamed = Buffer.from(bytes.toString('latin1').replaceAll('wasi:', 'wasy:').replaceAll('wasx:', 'wasi:'), 'latin1');
if (renamed.length !== bytes.length) throw new Error('renaming changed the component size');
await writeFile(join(out, 'tool.wasm'), renamed);
console.log(`wrote build/tool.wasm (${renamed.length} bytes)`);
