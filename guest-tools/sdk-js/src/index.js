// @toolhost/guest: write a toolhost tool in JavaScript. This entry point has
// no host import; log, random, clock and http are subpath modules, so a tool
// imports (and its component requires) only the capabilities it uses.
export { defineTool } from './define.js';
export { ToolError, invalidArguments } from './errors.js';
export { SchemaError } from './schema.js';
