// Runs the built tool through toolhost, as a model's call would go:
// installed into a temporary extension directory (`ext install .` runs
// `npm run build` and seals, per the manifest's [build] table), granted,
// called. The toolhost binary is $TOOLHOST, else `toolhost` on PATH.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const project = join(dirname(fileURLToPath(import.meta.url)), '..');
const toolhost = process.env.TOOLHOST || 'toolhost';
const manifest = readFileSync(join(project, 'toolhost-extension.toml'), 'utf8');
const id = /^id = "([^"]+)"/m.exec(manifest)[1];
const tool = /^tools = \["([^"]+)"/m.exec(manifest)[1];

// A scratch home for this test: extensions, compiled components and runs.
const scratch = mkdtempSync(join(tmpdir(), `${id}-test-`));
const global = ['--ext-dir', join(scratch, 'ext'), '--cache-dir', join(scratch, 'cache')];
const run = (...args) => execFileSync(toolhost, [...global, ...args], { cwd: project, encoding: 'utf8' });

test.before(() => {
  run('ext', 'install', '.');
  run('ext', 'grant', id);
});
test.after(() => rmSync(scratch, { recursive: true, force: true }));

// One call: the parsed `toolhost call --json` answer (a tool error too).
function call(args) {
  const done = spawnSync(toolhost, [...global, 'call', '--runs-dir', join(scratch, 'runs'), '--json', `ext/${id}:${tool}`, JSON.stringify(args)], { cwd: project, encoding: 'utf8' });
  assert.ok(done.stdout, `no answer (exit ${done.status}): ${done.stderr}`);
  return JSON.parse(done.stdout);
}

test('picks one of the options, twice', () => {
  const options = ['red', 'green', 'blue'];
  for (let i = 0; i < 2; i++) {
    const answer = call({ options });
    assert.equal(answer.result.isError, false, JSON.stringify(answer.result));
    assert.ok(options.includes(answer.result.content), answer.result.content);
    assert.deepEqual(answer.result.structured, { choice: answer.result.content, of: 3 });
    assert.ok(answer.report.randomDraws >= 1, 'drew from the recorded stream');
    assert.equal(answer.report.logs[0]?.message, 'picked one of 3 options');
  }
});

test('refuses arguments outside the schema', () => {
  for (const [args, message] of [
    [{ options: [] }, 'options: must have between 1 and 100 items, not 0'],
    [{ options: ['a'], seed: 1 }, 'seed: is not supported; supported arguments: options'],
    [{}, 'options: is required'],
  ]) {
    const answer = call(args);
    assert.equal(answer.result.isError, true);
    assert.equal(answer.result.errorCode, 'tool.invalid_arguments');
    assert.match(answer.result.content, new RegExp(message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  }
});
