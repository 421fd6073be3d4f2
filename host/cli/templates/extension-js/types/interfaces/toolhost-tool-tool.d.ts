/** @module Interface toolhost:tool/tool@0.1.0 **/
/**
 * Describe the tool. Called once when the host loads the component.
 */
export function describe(): Descriptor;
/**
 * Run the tool once. `arguments` is a JSON object as text. Every call
 * runs in a fresh instance: nothing survives from one call to the next.
 */
export function call(arguments: string): ToolOutput;
export type Descriptor = import('./toolhost-tool-types.js').Descriptor;
export type ToolOutput = import('./toolhost-tool-types.js').ToolOutput;
export type ToolError = import('./toolhost-tool-types.js').ToolError;
