/** A JSON Schema of the subset @toolhost/guest validates (see README). */
export type JsonSchema = true | {
  type?: SchemaType | SchemaType[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  enum?: unknown[];
  const?: unknown;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  /** In code points. */
  minLength?: number;
  maxLength?: number;
  /** A JavaScript regular expression (`u` flag), unanchored; runs on model input. */
  pattern?: string;
  minItems?: number;
  maxItems?: number;
  title?: string;
  description?: string;
  /** Documentation only: never applied to the arguments. */
  default?: unknown;
  examples?: unknown[];
  $schema?: string;
  $comment?: string;
};

export type SchemaType = 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean' | 'null';

/** The deepest nesting a schema may have. */
export const MAX_SCHEMA_DEPTH: number;

/** The schema uses a keyword or value the validator does not support. */
export class SchemaError extends Error {}

/**
 * Check `schema` (throws SchemaError) and return a validator that returns
 * its argument or throws ToolError `tool.invalid_arguments` naming the field.
 * Optional properties sent as `null` are removed when their schema does not allow null.
 */
export function compile(schema: JsonSchema): (value: unknown) => unknown;
