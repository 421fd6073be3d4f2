import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defineTool, ToolError, SchemaError } from '../src/index.js';
import { HttpError } from '../src/http-error.js';

const base = {
  name: 'text.pick',
  description: 'Pick one.',
  input: { type: 'object', properties: { n: { type: 'integer', minimum: 1, maximum: 3 } }, required: ['n'], additionalProperties: false },
  run: ({ n }) => `got ${n}`,
};

// What call() throws: the tool-error record, or an Error for a system error.
function thrown(tool, args) {
  try {
    tool.call(args);
  } catch (error) {
    return error;
  }
  assert.fail('call did not throw');
}

test('describe builds the WIT descriptor with defaulted annotations', () => {
  const tool = defineTool({ ...base, title: 'Pick', output: { type: 'object' }, annotations: { readOnly: true, sourceKind: 'random' } });
  assert.deepEqual(tool.describe(), {
    nativeName: 'text.pick',
    title: 'Pick',
    description: 'Pick one.',
    inputSchema: JSON.stringify(base.input),
    outputSchema: '{"type":"object"}',
    annotations: { readOnly: true, mutating: false, control: false, idempotent: false, openWorld: false, sourceKind: 'random' },
  });
  const bare = defineTool({ name: 'x.y', description: 'd', run: () => '' }).describe();
  assert.equal(bare.title, undefined);
  assert.equal(bare.outputSchema, undefined);
  assert.equal(bare.inputSchema, '{"type":"object","properties":{},"additionalProperties":false}');
});

test('call returns a tool-output for text and for objects', () => {
  assert.deepEqual(defineTool(base).call('{"n":2}'), { content: 'got 2', structured: undefined, resourceRefs: [], effect: undefined });
  const rich = defineTool({ ...base, run: ({ n }) => ({ content: 'c', structured: { n }, resourceRefs: ['x:1'] }) });
  assert.deepEqual(rich.call('{"n":1}'), { content: 'c', structured: '{"n":1}', resourceRefs: ['x:1'], effect: undefined });
});

test('bad JSON, non-objects and schema violations are tool.invalid_arguments records', () => {
  const tool = defineTool(base);
  for (const [args, message] of [
    ['{nope', 'arguments must be an object (the text is not valid JSON)'],
    ['[1]', 'arguments must be an object, not an array'],
    ['null', 'arguments must be an object, not null'],
    ['"x"', 'arguments must be an object, not a string'],
    ['{"n":4}', 'n: must be an integer between 1 and 3'],
    ['{"n":1,"m":2}', 'm: is not supported; supported arguments: n'],
  ]) {
    const error = thrown(tool, args);
    assert.ok(!(error instanceof Error), `a record, not an Error: ${error}`);
    assert.deepEqual(error, { code: 'tool.invalid_arguments', message, structured: undefined });
  }
});

test('a ToolError from run becomes the tool-error record', () => {
  const tool = defineTool({ ...base, run: () => { throw new ToolError('pick.empty', 'Nothing to pick.', { left: 0 }); } });
  assert.deepEqual(thrown(tool, '{"n":1}'), { code: 'pick.empty', message: 'Nothing to pick.', structured: '{"left":0}' });
});

test('an HttpError from run becomes its tool-error record', () => {
  const tool = defineTool({ ...base, run: () => { throw new HttpError('http.denied', 'refused'); } });
  assert.deepEqual(thrown(tool, '{"n":1}'), { code: 'http.denied', message: 'refused', structured: undefined });
});

test('any other exception is rethrown as a plain Error without code (the call traps)', () => {
  const cases = [
    () => { null.x; },
    () => { const e = new Error('has a code'); e.code = 'ENOENT'; throw e; },
    () => { throw 'a string'; },
    () => { throw { code: 'sneaky.code', message: 'record-shaped' }; },
    () => Promise.resolve('async'),
    () => 42,
    () => ({ content: 1 }),
    () => ({ content: 'x', resourceRefs: [1] }),
  ];
  for (const run of cases) {
    const error = thrown(defineTool({ ...base, run }), '{"n":1}');
    assert.ok(error instanceof Error, String(error));
    assert.equal(error.code, undefined);
    assert.match(error.message, /^the tool failed: /);
  }
});

test('definition mistakes throw when the tool is defined', () => {
  const bad = [
    { ...base, name: 'Text.Pick' },
    { ...base, name: '' },
    { ...base, description: ' ' },
    { ...base, run: undefined },
    { ...base, input: { type: 'array' } },
    { ...base, annotations: { readonly: true } },
    { ...base, annotations: { openWorld: 'yes' } },
    { ...base, extra: 1 },
  ];
  for (const definition of bad) assert.throws(() => defineTool(definition), TypeError, JSON.stringify(definition));
  assert.throws(() => defineTool({ ...base, input: { type: 'object', properties: { a: { format: 'uri' } } } }), SchemaError);
});

test('ToolError codes are checked', () => {
  for (const code of ['Tool.x', 'tool', 'tool..x', 'tool.x y', '', 'a.'.repeat(100) + 'b']) {
    assert.throws(() => new ToolError(code, 'm'), TypeError, code);
  }
  assert.equal(new ToolError('a.b_c.d1', 'm').code, 'a.b_c.d1');
});

test('a string cut inside a character crosses to the host well formed', () => {
  const cut = `${'x'.repeat(3)}\u{1F600}`.slice(0, 4);
  const text = defineTool({ ...base, run: () => cut }).call('{"n":1}');
  assert.equal(text.content, 'xxx\uFFFD');
  const rich = defineTool({ ...base, run: () => ({ content: cut, resourceRefs: [cut] }) }).call('{"n":1}');
  assert.deepEqual([rich.content, rich.resourceRefs], ['xxx\uFFFD', ['xxx\uFFFD']]);
  assert.throws(
    () => defineTool({ ...base, run: () => { throw new ToolError('x.cut', cut); } }).call('{"n":1}'),
    (thrown) => thrown.message === 'xxx\uFFFD' && thrown.code === 'x.cut',
  );
});

test('structured results and error details cross as JSON a strict parser reads', () => {
  const cut = '\u{1F600}'.slice(0, 1);
  const strict = (text) => !/\\u[dD][89a-fA-F]/.test(text) && JSON.parse(text);
  const rich = defineTool({ ...base, run: () => ({ content: 'c', structured: { [cut]: [cut, 1], ok: 'é\u{1F600}' } }) }).call('{"n":1}');
  assert.deepEqual(strict(rich.structured), { '\uFFFD': ['\uFFFD', 1], ok: 'é\u{1F600}' });
  assert.throws(
    () => defineTool({ ...base, run: () => { throw new ToolError('x.cut', 'm', { why: cut }); } }).call('{"n":1}'),
    (thrown) => strict(thrown.structured).why === '\uFFFD',
  );
});
