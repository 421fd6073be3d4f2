// Hostile guest: a call that asks for gigabytes. `new Array(1e9).fill(1)`
// makes the engine grow linear memory until the host's limit refuses
// (`sandbox.memory_limit` under the default 64 MiB).
import { log } from 'toolhost:host/log@0.1.4';

export const tool = {
  describe() {
    return {
      nativeName: 'hostile.membomb',
      title: undefined,
      description: 'Allocates without bound.',
      inputSchema: '{"type":"object","properties":{},"additionalProperties":false}',
      outputSchema: undefined,
      annotations: { readOnly: true, mutating: false, control: false, idempotent: true, openWorld: false, sourceKind: undefined },
    };
  },
  call() {
    log('info', 'allocating');
    const huge = new Array(1e9).fill(1);
    return { content: String(huge.length), structured: undefined, resourceRefs: [], effect: undefined };
  },
};
