export { defineTool, ToolDefinition, ToolExport, Annotations, RunResult } from './define.js';
export { ToolError, ToolErrorRecord, invalidArguments } from './errors.js';
export { SchemaError, JsonSchema } from './schema.js';
