import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compile, SchemaError, MAX_SCHEMA_DEPTH } from '../src/schema.js';
import { ToolError } from '../src/errors.js';

// The message of the tool.invalid_arguments error validate(value) throws.
function refusal(schema, value) {
  const validate = compile(schema);
  try {
    validate(value);
  } catch (error) {
    assert.ok(error instanceof ToolError, `not a ToolError: ${error}`);
    assert.equal(error.code, 'tool.invalid_arguments');
    return error.message;
  }
  assert.fail(`accepted ${JSON.stringify(value)}`);
}

const pickSchema = {
  type: 'object',
  properties: {
    options: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 5 }, minItems: 1, maxItems: 3 },
    times: { type: 'integer', minimum: 1, maximum: 10 },
    mode: { enum: ['fast', 'slow'] },
    ratio: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 1 },
    nested: { type: 'object', properties: { flag: { type: 'boolean' } }, required: ['flag'], additionalProperties: false },
    extra: { type: 'object', additionalProperties: { type: 'integer' } },
    fixed: { const: 'yes' },
    maybe: { type: ['string', 'null'] },
  },
  required: ['options'],
  additionalProperties: false,
};

test('valid arguments pass unchanged', () => {
  const value = { options: ['a', 'b'], times: 3, mode: 'fast', ratio: 0.5, nested: { flag: true }, extra: { a: 1 }, fixed: 'yes', maybe: null };
  assert.deepEqual(compile(pickSchema)(structuredClone(value)), value);
});

test('errors name the field path', () => {
  assert.equal(refusal(pickSchema, { options: ['a'], times: 11 }), 'times: must be an integer between 1 and 10');
  assert.equal(refusal(pickSchema, { options: ['a'], times: 2.5 }), 'times: must be an integer, not a number');
  assert.equal(refusal(pickSchema, { options: ['a'], times: '3' }), 'times: must be an integer, not a string');
  assert.equal(refusal(pickSchema, {}), 'options: is required');
  assert.equal(refusal(pickSchema, { options: [] }), 'options: must have between 1 and 3 items, not 0');
  assert.equal(refusal(pickSchema, { options: ['a', 7] }), 'options[1]: must be a string, not an integer');
  assert.equal(refusal(pickSchema, { options: ['abcdef'] }), 'options[0]: must be between 1 and 5 characters long, not 6');
  assert.equal(refusal(pickSchema, { options: ['a'], mode: 'medium' }), 'mode: must be one of "fast", "slow"');
  assert.equal(refusal(pickSchema, { options: ['a'], ratio: 1 }), 'ratio: must be a number greater than 0 and less than 1');
  assert.equal(refusal(pickSchema, { options: ['a'], nested: {} }), 'nested.flag: is required');
  assert.equal(refusal(pickSchema, { options: ['a'], nested: { flag: true, x: 1 } }), 'nested.x: is not supported; supported fields: flag');
  assert.equal(refusal(pickSchema, { options: ['a'], extra: { a: 'b' } }), 'extra.a: must be an integer, not a string');
  assert.equal(refusal(pickSchema, { options: ['a'], fixed: 'no' }), 'fixed: must be "yes"');
  assert.match(refusal(pickSchema, { options: ['a'], seed: 1 }), /^seed: is not supported; supported arguments: options, times/);
});

test('the root must be an object', () => {
  assert.equal(refusal({ type: 'object' }, []), 'arguments must be an object, not an array');
  assert.equal(refusal({ type: 'object', additionalProperties: false }, { a: 1 }), 'a: is not supported; this tool takes no arguments');
});

test('lengths count code points, not UTF-16 units', () => {
  const schema = { type: 'object', properties: { s: { type: 'string', maxLength: 2 } } };
  compile(schema)({ s: '😀😀' });
  assert.equal(refusal(schema, { s: '😀😀😀' }), 's: must be at most 2 characters long, not 3');
});

test('optional null counts as absent and is removed; required null is refused', () => {
  const schema = { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['b'] };
  const value = compile(schema)({ a: null, b: 1 });
  assert.deepEqual(value, { b: 1 });
  assert.equal(refusal(schema, { b: null }), 'b: must be an integer, not null');
});

test('non-finite numbers and non-integers are told apart', () => {
  assert.equal(refusal({ type: 'object', properties: { n: { type: 'integer' } } }, { n: 1.5 }), 'n: must be an integer, not a number');
  compile({ type: 'object', properties: { n: { type: 'number' } } })({ n: 3 });
});

test('pattern is a unanchored u-flag regex', () => {
  const schema = { type: 'object', properties: { id: { type: 'string', pattern: '^[a-z]+$' } } };
  compile(schema)({ id: 'abc' });
  assert.equal(refusal(schema, { id: 'ab1' }), 'id: must match the pattern ^[a-z]+$');
  assert.throws(() => compile({ type: 'object', properties: { id: { type: 'string', pattern: '(' } } }), SchemaError);
});

test('a model-chosen key is cut in messages', () => {
  const long = 'k'.repeat(5000);
  const message = refusal({ type: 'object', properties: { a: {} }, additionalProperties: false }, { [long]: 1 });
  assert.ok(message.length < 200, message);
});

test('__proto__ keys are data, not prototypes', () => {
  const value = JSON.parse('{"__proto__": {"x": 1}}');
  assert.match(refusal({ type: 'object', properties: {}, additionalProperties: false }, value), /^__proto__: is not supported/);
  assert.equal(refusal({ type: 'object', properties: { constructor: { type: 'string' } } }, { constructor: 1 }), 'constructor: must be a string, not an integer');
});

test('unsupported keywords and bad schemas fail at compile time', () => {
  for (const schema of [
    { type: 'object', properties: { a: { type: 'string', format: 'uri' } } },
    { type: 'object', oneOf: [] },
    { type: 'object', properties: { a: { $ref: '#/x' } } },
    { type: 'thing' },
    { type: 'object', properties: { a: { minimum: '1' } } },
    { type: 'object', properties: { a: { maxLength: -1 } } },
    { type: 'object', properties: { a: { items: [{}] } } },
    { type: 'object', required: 'a' },
  ]) {
    assert.throws(() => compile(schema), SchemaError, JSON.stringify(schema));
  }
});

test('schema depth is bounded', () => {
  let schema = { type: 'object' };
  for (let i = 0; i <= MAX_SCHEMA_DEPTH; i++) schema = { type: 'object', properties: { a: schema } };
  assert.throws(() => compile(schema), /nested deeper/);
});

test('a deep argument under a shallow schema costs nothing extra', () => {
  let deep = 1;
  for (let i = 0; i < 100000; i++) deep = [deep];
  compile({ type: 'object', properties: { a: {} } })({ a: deep });
});
