// defineTool: turns a plain definition into the `{ describe, call }` object
// a component exports as `toolhost:tool/tool@0.1.0`.
//
// Errors, explicitly (the engines differ, so the SDK decides):
// - a ToolError from `run` (or from argument validation), or an HttpError
//   from the http module, is returned as the
//   WIT `tool-error`: the model reads it and the run continues;
// - any other exception is a bug in the tool: the call traps, and the host
//   reports `sandbox.guest_trap`. The SDK rethrows it as a fresh Error with
//   no `code`, because SpiderMonkey would otherwise return an Error that has
//   `code`/`message` properties as a tool error, unchecked, while QuickJS
//   traps on every Error object. (QuickJS's trap text keeps the message and
//   the JS stack; SpiderMonkey's keeps neither.)

import { ToolError, invalidArguments } from './errors.js';
import { compile } from './schema.js';
import { HttpError } from './http-error.js';
import { jsonText, wellFormed } from './utf8.js';

const ANNOTATIONS = ['readOnly', 'mutating', 'control', 'idempotent', 'openWorld', 'sourceKind'];
const FIELDS = new Set(['name', 'title', 'description', 'input', 'output', 'annotations', 'run']);
const DEFAULT_INPUT = { type: 'object', properties: {}, additionalProperties: false };

/**
 * @param {import('./define.d.ts').ToolDefinition} definition
 * @returns {import('./define.d.ts').ToolExport}
 */
export function defineTool(definition) {
  const def = checkDefinition(definition);
  const validate = compile(def.input);
  const descriptor = {
    nativeName: def.name,
    title: def.title,
    description: def.description,
    inputSchema: JSON.stringify(def.input),
    outputSchema: def.output === undefined ? undefined : JSON.stringify(def.output),
    annotations: annotations(def.annotations ?? {}),
  };
  return {
    describe() {
      return descriptor;
    },
    call(argumentsJson) {
      try {
        const args = validate(parseArguments(argumentsJson));
        return toOutput(def.run(args));
      } catch (error) {
        if (error instanceof ToolError) throw error.toRecord();
        // An HttpError is recoverable too (like `?` on the Rust SDK's HttpError).
        if (error instanceof HttpError) throw error.toToolError().toRecord();
        throw systemError(error);
      }
    },
  };
}

function parseArguments(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalidArguments('arguments must be an object (the text is not valid JSON)');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidArguments(`arguments must be an object, not ${value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`}`);
  }
  return value;
}

function toOutput(result) {
  if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
    throw new TypeError('run must return its answer, not a Promise (toolhost JS tools are synchronous)');
  }
  if (typeof result === 'string') return { content: wellFormed(result), structured: undefined, resourceRefs: [], effect: undefined };
  if (result === null || typeof result !== 'object' || typeof result.content !== 'string') {
    throw new TypeError('run must return a string or { content: string, structured?, resourceRefs? }');
  }
  const refs = result.resourceRefs ?? [];
  if (!Array.isArray(refs) || !refs.every((r) => typeof r === 'string')) {
    throw new TypeError('resourceRefs must be a list of strings');
  }
  return {
    content: wellFormed(result.content),
    structured: result.structured === undefined ? undefined : jsonText(result.structured),
    resourceRefs: refs.map(wellFormed),
    effect: undefined,
  };
}

function systemError(error) {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : `thrown ${typeof error}: ${String(error)}`;
  return new Error(`the tool failed: ${text.slice(0, 2000)}`);
}

function annotations(given) {
  for (const key of Object.keys(given)) {
    if (!ANNOTATIONS.includes(key)) throw new TypeError(`defineTool: unknown annotation "${key}" (known: ${ANNOTATIONS.join(', ')})`);
  }
  const flag = (key) => {
    if (given[key] !== undefined && typeof given[key] !== 'boolean') throw new TypeError(`defineTool: annotations.${key} must be true or false`);
    return given[key] ?? false;
  };
  if (given.sourceKind !== undefined && typeof given.sourceKind !== 'string') {
    throw new TypeError('defineTool: annotations.sourceKind must be a string');
  }
  return {
    readOnly: flag('readOnly'),
    mutating: flag('mutating'),
    control: flag('control'),
    idempotent: flag('idempotent'),
    openWorld: flag('openWorld'),
    sourceKind: given.sourceKind,
  };
}

// Mistakes in the definition throw when the module loads, which is at
// build time (the build snapshots the initialized module): an author sees
// them from `npm run build`, never from a model's call.
function checkDefinition(definition) {
  if (definition === null || typeof definition !== 'object') throw new TypeError('defineTool takes an object');
  for (const key of Object.keys(definition)) {
    if (!FIELDS.has(key)) throw new TypeError(`defineTool: unknown field "${key}" (known: ${[...FIELDS].join(', ')})`);
  }
  const { name, title, description, run } = definition;
  // The host's rule for extension tool names (host/core/src/id.rs).
  if (typeof name !== 'string' || !/^[a-z][a-z0-9._-]*$/.test(name) || name.length > 256) {
    throw new TypeError(`defineTool: name must be lowercase ASCII letters, digits, ".", "_" and "-", starting with a letter ("text.pick"), not ${JSON.stringify(name)}`);
  }
  if (title !== undefined && typeof title !== 'string') throw new TypeError('defineTool: title must be a string');
  if (typeof description !== 'string' || description.trim() === '') throw new TypeError('defineTool: description is required');
  if (typeof run !== 'function') throw new TypeError('defineTool: run must be a function');
  const input = definition.input ?? DEFAULT_INPUT;
  if (input === null || typeof input !== 'object' || input.type !== 'object') {
    throw new TypeError('defineTool: input must be a JSON Schema whose root is {"type": "object", ...}');
  }
  if (definition.output !== undefined && (definition.output === null || typeof definition.output !== 'object')) {
    throw new TypeError('defineTool: output must be a JSON Schema object');
  }
  return { ...definition, input };
}
