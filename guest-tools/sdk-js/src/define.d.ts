import type { JsonSchema } from './schema.js';

/** Behaviour hints; every flag defaults to false (like the Rust SDK's `Annotations::default()`). */
export interface Annotations {
  readOnly?: boolean;
  mutating?: boolean;
  /** Returns an effect for the host to apply: builtins only. */
  control?: boolean;
  idempotent?: boolean;
  openWorld?: boolean;
  /** What the tool works on ("web", "random", ...), for UIs. */
  sourceKind?: string;
}

/** What `run` may return: Markdown text, or text with facts for audit and UIs. */
export type RunResult = string | {
  /** Markdown for the model: the only part it sees. */
  content: string;
  /** Any JSON value, serialized into `structured` (never shown to the model). */
  structured?: unknown;
  /** What the call read or wrote, e.g. a URL. */
  resourceRefs?: string[];
};

export interface ToolDefinition<Args = any> {
  /** The native name: lowercase ASCII letters, digits, `.`, `_`, `-`, starting with a letter ("text.pick"). List it in the manifest's `tools`. */
  name: string;
  title?: string;
  /** Text shown to the model. */
  description: string;
  /** JSON Schema of the arguments (root `type: "object"`); checked before `run`. Default: no arguments. */
  input?: JsonSchema;
  /** JSON Schema of `structured` (published, not checked). */
  output?: JsonSchema;
  annotations?: Annotations;
  /** Synchronous. Throw ToolError for a recoverable failure; any other exception traps the call. */
  run(args: Args): RunResult;
}

/** The shape of the `toolhost:tool/tool@0.1.0` export as jco binds it. */
export interface ToolExport {
  describe(): {
    nativeName: string;
    title: string | undefined;
    description: string;
    inputSchema: string;
    outputSchema: string | undefined;
    annotations: Required<Omit<Annotations, 'sourceKind'>> & { sourceKind: string | undefined };
  };
  call(argumentsJson: string): {
    content: string;
    structured: string | undefined;
    resourceRefs: string[];
    effect: undefined;
  };
}

/** Build the export: `export const tool = defineTool({...})`. Throws TypeError/SchemaError on a bad definition. */
export function defineTool<Args = any>(definition: ToolDefinition<Args>): ToolExport;
