/** @module Interface toolhost:tool/types@0.1.0 **/
/**
 * Behaviour hints. Hosts treat them as hints only; an extension's
 * annotations are never trusted for a security decision.
 */
export interface Annotations {
  /**
   * Reads state but never changes it.
   */
  readOnly: boolean,
  /**
   * Changes workspace or chat state.
   */
  mutating: boolean,
  /**
   * Returns an `effect` that the host applies to the run.
   */
  control: boolean,
  /**
   * Calling twice with the same arguments gives the same result.
   */
  idempotent: boolean,
  /**
   * Talks to something outside the run (network, other processes).
   */
  openWorld: boolean,
  /**
   * What the tool works on: "workspace", "chat", "worldInfo",
   * "skill", "agent", "random", ... (free text, for UIs).
   */
  sourceKind?: string,
}
/**
 * What a tool says about itself. A component describes exactly one tool.
 */
export interface Descriptor {
  /**
   * The tool's name inside its provider, e.g. "dice.roll". The host
   * prefixes the provider to form the canonical id ("builtin:dice.roll").
   */
  nativeName: string,
  title?: string,
  /**
   * Text shown to the model.
   */
  description: string,
  /**
   * JSON Schema of the arguments, as JSON text; its root is
   * `{"type":"object", ...}`.
   */
  inputSchema: string,
  /**
   * JSON Schema of `tool-output.structured`, as JSON text.
   */
  outputSchema?: string,
  annotations: Annotations,
}
/**
 * How a committed file lands in the chat.
 * # Variants
 * 
 * ## `"replace"`
 * 
 * Replace this run's message.
 * ## `"append"`
 * 
 * Create this run's message on the first commit, then append to it.
 */
export type CommitMode = 'replace' | 'append';
export interface CommitRequest {
  /**
   * Workspace path of the text to commit; none = the profile's message body.
   */
  path?: string,
  mode: CommitMode,
  reason?: string,
}
export interface FinishRequest {
  reason?: string,
}
export interface DelegateRequest {
  agentId: string,
  /**
   * The task brief, a JSON object as text (`objective` is required).
   */
  task: string,
}
export interface HandoffRequest {
  agentId: string,
  /**
   * The handoff brief, a JSON object as text (`objective` is required).
   */
  brief: string,
}
/**
 * # Variants
 * 
 * ## `"next-completed"`
 * 
 * ## `"all-completed"`
 * 
 * ## `"status-only"`
 */
export type AwaitMode = 'next-completed' | 'all-completed' | 'status-only';
export interface AwaitRequest {
  /**
   * Empty = every task this invocation delegated.
   */
  taskIds: Array<string>,
  mode: AwaitMode,
  timeoutMs?: number,
}
export interface TaskReturnRequest {
  /**
   * The child's report, a JSON object as text (`summary` is required).
   */
  report: string,
}
/**
 * A change to the run that only the host may make. Control tools
 * validate their arguments and return one; the host applies and journals it.
 */
export type Effect = EffectCommit | EffectFinish | EffectDelegate | EffectHandoff | EffectAwaitTasks | EffectTaskReturn;
export interface EffectCommit {
  tag: 'commit',
  val: CommitRequest,
}
export interface EffectFinish {
  tag: 'finish',
  val: FinishRequest,
}
export interface EffectDelegate {
  tag: 'delegate',
  val: DelegateRequest,
}
export interface EffectHandoff {
  tag: 'handoff',
  val: HandoffRequest,
}
export interface EffectAwaitTasks {
  tag: 'await-tasks',
  val: AwaitRequest,
}
export interface EffectTaskReturn {
  tag: 'task-return',
  val: TaskReturnRequest,
}
/**
 * A successful call.
 */
export interface ToolOutput {
  /**
   * Markdown for the model. The only part the model ever sees.
   */
  content: string,
  /**
   * JSON text for audit and UIs; never shown to the model.
   */
  structured?: string,
  /**
   * References to what the call read or wrote ("workspace:plan/a.md#L1-L9").
   */
  resourceRefs: Array<string>,
  effect?: Effect,
}
/**
 * A recoverable failure: the model reads it and the run continues.
 */
export interface ToolError {
  /**
   * Dotted lowercase code, e.g. "dice.invalid_formula".
   */
  code: string,
  /**
   * One or two sentences telling the model what went wrong and what to do.
   */
  message: string,
  /**
   * JSON text with details for audit and UIs.
   */
  structured?: string,
}
