// Hostile guest: a call that never ends. The host must stop it
// (`sandbox.out_of_fuel` under the default limits) and keep serving.
import { log } from 'toolhost:host/log@0.1.4';

export const tool = {
  describe() {
    return {
      nativeName: 'hostile.spin',
      title: undefined,
      description: 'Loops forever.',
      inputSchema: '{"type":"object","properties":{},"additionalProperties":false}',
      outputSchema: undefined,
      annotations: { readOnly: true, mutating: false, control: false, idempotent: true, openWorld: false, sourceKind: undefined },
    };
  },
  call() {
    log('info', 'spinning');
    for (;;) {}
  },
};
