// Recoverable errors: what the model reads before the run goes on.
// A ToolError thrown from `run` becomes the WIT `tool-error`; any other
// exception is a bug in the tool (see define.js for what happens to it).
import { jsonText, wellFormed } from './utf8.js';

// Dotted lowercase, like the host's own codes: "dice.invalid_formula".
const CODE = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;
const MAX_CODE_LENGTH = 128;

export class ToolError extends Error {
  /**
   * @param {string} code dotted lowercase, e.g. "weather.unknown_city"
   * @param {string} message one or two sentences telling the model what to do
   * @param {unknown} [structured] any JSON value, for audit and UIs (never shown to the model)
   */
  constructor(code, message, structured) {
    super(String(message));
    if (typeof code !== 'string' || code.length > MAX_CODE_LENGTH || !CODE.test(code)) {
      // A bad code is the author's bug: fail loudly, not as a tool error.
      throw new TypeError(`ToolError code must be dotted lowercase like "tool.failed", not ${JSON.stringify(String(code)).slice(0, 80)}`);
    }
    this.name = 'ToolError';
    this.code = code;
    this.structured = structured;
  }

  /** The `tool-error` record the component returns. */
  toRecord() {
    return {
      code: this.code,
      message: wellFormed(this.message),
      structured: this.structured === undefined ? undefined : jsonText(this.structured),
    };
  }
}

/** `tool.invalid_arguments`: the code of every refused argument. */
export function invalidArguments(message) {
  return new ToolError('tool.invalid_arguments', message);
}
