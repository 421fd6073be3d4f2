// A small JSON Schema validator for tool arguments: a documented subset,
// checked once when the tool is defined (an unsupported keyword is the
// author's mistake, so it fails the build, not a call) and then applied to
// every call's model-controlled arguments with bounded work.
//
// Supported: type (a name or a list of names: object, array, string,
// integer, number, boolean, null), properties, required,
// additionalProperties (true, false or a schema), items (one schema),
// enum, const, minimum, maximum, exclusiveMinimum, exclusiveMaximum
// (numbers), minLength, maxLength (code points), pattern (a JavaScript
// regular expression with the `u` flag: see README, it runs on model
// input), minItems, maxItems. Ignored (annotations): title, description,
// default (never applied), examples, $schema, $comment.
//
// The work per call is bounded: the validator only descends where the
// schema does (depth at most MAX_SCHEMA_DEPTH) and visits each value once.

import { invalidArguments } from './errors.js';

const TYPES = new Set(['object', 'array', 'string', 'integer', 'number', 'boolean', 'null']);
const CHECKED = new Set([
  'type', 'properties', 'required', 'additionalProperties', 'items', 'enum', 'const',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'minLength', 'maxLength',
  'pattern', 'minItems', 'maxItems',
]);
const IGNORED = new Set(['title', 'description', 'default', 'examples', '$schema', '$comment']);
export const MAX_SCHEMA_DEPTH = 32;
// A model-chosen key or value quoted in a message is cut to this length.
const MAX_QUOTED = 60;

/** Thrown by compile(): the schema uses something this validator does not do. */
export class SchemaError extends Error {
  constructor(path, message) {
    super(`input schema at ${path || '(root)'}: ${message}`);
    this.name = 'SchemaError';
  }
}

/**
 * Check `schema` and return validate(value) -> value, which throws a
 * ToolError `tool.invalid_arguments` naming the first bad field.
 * Optional properties sent as null (when the schema does not allow null)
 * count as absent and are removed, as the Rust SDK reads them.
 */
export function compile(schema) {
  const node = compileNode(schema, '', 0);
  return (value) => {
    check(node, value, '');
    return value;
  };
}

function compileNode(schema, path, depth) {
  if (depth > MAX_SCHEMA_DEPTH) throw new SchemaError(path, `nested deeper than ${MAX_SCHEMA_DEPTH}`);
  if (schema === true || (isPlainObject(schema) && Object.keys(schema).length === 0)) return { any: true };
  if (!isPlainObject(schema)) throw new SchemaError(path, 'a schema must be an object (or true)');
  for (const key of Object.keys(schema)) {
    if (!CHECKED.has(key) && !IGNORED.has(key)) {
      throw new SchemaError(path, `"${key}" is not supported by @toolhost/guest's validator (supported: ${[...CHECKED].join(', ')})`);
    }
  }
  const node = { any: false };
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (types.length === 0 || !types.every((t) => TYPES.has(t))) {
      throw new SchemaError(path, `type must be one of ${[...TYPES].join(', ')} or a list of them`);
    }
    node.types = types;
  }
  if (schema.properties !== undefined) {
    if (!isPlainObject(schema.properties)) throw new SchemaError(path, 'properties must be an object');
    node.properties = new Map();
    for (const [name, sub] of Object.entries(schema.properties)) {
      node.properties.set(name, compileNode(sub, join(path, name), depth + 1));
    }
  }
  if (schema.required !== undefined) {
    if (!Array.isArray(schema.required) || !schema.required.every((r) => typeof r === 'string')) {
      throw new SchemaError(path, 'required must be a list of names');
    }
    node.required = schema.required;
  }
  if (schema.additionalProperties === false) node.closed = true;
  else if (schema.additionalProperties !== undefined && schema.additionalProperties !== true) {
    node.additional = compileNode(schema.additionalProperties, join(path, '*'), depth + 1);
  }
  if (schema.items !== undefined) {
    if (Array.isArray(schema.items)) throw new SchemaError(path, 'items must be one schema (tuples are not supported)');
    node.items = compileNode(schema.items, `${path}[]`, depth + 1);
  }
  if (schema.enum !== undefined) {
    if (!Array.isArray(schema.enum) || schema.enum.length === 0) throw new SchemaError(path, 'enum must be a non-empty list');
    node.enum = schema.enum.map((v) => JSON.stringify(v));
  }
  if (schema.const !== undefined) node.const = JSON.stringify(schema.const);
  for (const key of ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum']) {
    if (schema[key] === undefined) continue;
    if (typeof schema[key] !== 'number' || !Number.isFinite(schema[key])) throw new SchemaError(path, `${key} must be a number`);
    node[key] = schema[key];
  }
  for (const key of ['minLength', 'maxLength', 'minItems', 'maxItems']) {
    if (schema[key] === undefined) continue;
    if (!Number.isSafeInteger(schema[key]) || schema[key] < 0) throw new SchemaError(path, `${key} must be a non-negative integer`);
    node[key] = schema[key];
  }
  if (schema.pattern !== undefined) {
    if (typeof schema.pattern !== 'string') throw new SchemaError(path, 'pattern must be a string');
    try {
      node.pattern = new RegExp(schema.pattern, 'u');
    } catch (error) {
      throw new SchemaError(path, `pattern is not a valid regular expression: ${error.message}`);
    }
    node.patternText = schema.pattern;
  }
  return node;
}

function check(node, value, path) {
  if (node.any) return;
  const kind = kindOf(value);
  if (node.types && !node.types.some((t) => t === kind || (t === 'number' && kind === 'integer'))) {
    fail(path, `must be ${node.types.map(article).join(' or ')}, not ${article(kind)}`);
  }
  if (node.const !== undefined && JSON.stringify(value) !== node.const) fail(path, `must be ${node.const}`);
  if (node.enum && !node.enum.includes(JSON.stringify(value))) fail(path, `must be one of ${node.enum.join(', ')}`);
  if (kind === 'integer' || kind === 'number') checkNumber(node, value, path);
  else if (kind === 'string') checkString(node, value, path);
  else if (kind === 'array') checkArray(node, value, path);
  else if (kind === 'object') checkObject(node, value, path);
}

function checkNumber(node, value, path) {
  const low = node.minimum !== undefined && value < node.minimum;
  const high = node.maximum !== undefined && value > node.maximum;
  const lowEx = node.exclusiveMinimum !== undefined && value <= node.exclusiveMinimum;
  const highEx = node.exclusiveMaximum !== undefined && value >= node.exclusiveMaximum;
  if (!(low || high || lowEx || highEx)) return;
  // Name the whole allowed range, so the model fixes it in one try.
  const what = node.types && !node.types.includes('number') ? 'an integer' : 'a number';
  const bounds = [];
  if (node.minimum !== undefined && node.maximum !== undefined) bounds.push(`between ${node.minimum} and ${node.maximum}`);
  else if (node.minimum !== undefined) bounds.push(`at least ${node.minimum}`);
  else if (node.maximum !== undefined) bounds.push(`at most ${node.maximum}`);
  if (node.exclusiveMinimum !== undefined) bounds.push(`greater than ${node.exclusiveMinimum}`);
  if (node.exclusiveMaximum !== undefined) bounds.push(`less than ${node.exclusiveMaximum}`);
  fail(path, `must be ${what} ${bounds.join(' and ')}`);
}

function checkString(node, value, path) {
  if (node.minLength !== undefined || node.maxLength !== undefined) {
    const length = codePoints(value);
    if ((node.minLength !== undefined && length < node.minLength) || (node.maxLength !== undefined && length > node.maxLength)) {
      fail(path, `must be ${range(node.minLength, node.maxLength, 'characters')} long, not ${length}`);
    }
  }
  if (node.pattern && !node.pattern.test(value)) fail(path, `must match the pattern ${node.patternText}`);
}

function checkArray(node, value, path) {
  if ((node.minItems !== undefined && value.length < node.minItems) || (node.maxItems !== undefined && value.length > node.maxItems)) {
    fail(path, `must have ${range(node.minItems, node.maxItems, 'items')}, not ${value.length}`);
  }
  if (node.items) value.forEach((item, index) => check(node.items, item, `${path}[${index}]`));
}

function checkObject(node, value, path) {
  for (const name of node.required ?? []) {
    if (!Object.hasOwn(value, name)) fail(join(path, name), 'is required');
  }
  for (const name of Object.keys(value)) {
    const sub = node.properties?.get(name);
    if (sub) {
      const optional = !(node.required ?? []).includes(name);
      if (value[name] === null && optional && !allowsNull(sub)) {
        delete value[name];
        continue;
      }
      check(sub, value[name], join(path, name));
    } else if (node.closed) {
      const known = node.properties ? [...node.properties.keys()] : [];
      const what = path === '' ? 'arguments' : 'fields';
      fail(join(path, quoteKey(name)), known.length === 0
        ? `is not supported; this ${path === '' ? 'tool takes no arguments' : 'object takes no fields'}`
        : `is not supported; supported ${what}: ${known.join(', ')}`);
    } else if (node.additional) {
      check(node.additional, value[name], join(path, quoteKey(name)));
    }
  }
}

function allowsNull(node) {
  return node.any || !node.types || node.types.includes('null');
}

function fail(path, message) {
  throw invalidArguments(path === '' ? `arguments ${message}` : `${path}: ${message}`);
}

function range(min, max, unit) {
  if (min !== undefined && max !== undefined) return min === max ? `exactly ${min} ${unit}` : `between ${min} and ${max} ${unit}`;
  if (min !== undefined) return `at least ${min} ${unit}`;
  return `at most ${max} ${unit}`;
}

function codePoints(text) {
  let pairs = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) { pairs++; i++; }
    }
  }
  return text.length - pairs;
}

export function kindOf(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  if (typeof value === 'string' || typeof value === 'boolean' || typeof value === 'object') return typeof value;
  return 'unsupported';
}

function article(kind) {
  return { object: 'an object', array: 'an array', string: 'a string', integer: 'an integer', number: 'a number', boolean: 'a boolean', null: 'null' }[kind] ?? kind;
}

function join(path, name) {
  return path === '' ? name : `${path}.${name}`;
}

function quoteKey(name) {
  return name.length > MAX_QUOTED ? `${name.slice(0, MAX_QUOTED)}…` : name;
}

function isPlainObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
