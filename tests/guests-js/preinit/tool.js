// Does the build's pre-initialization snapshot (Wizer) keep top-level work
// out of every call? The module builds a 200,000-entry table once, at top
// level; `{"i": N}` reads it, `{"i": N, "rebuild": true}` builds it again
// inside the call. Compare the two calls' fuel: when the snapshot works, the
// first costs next to nothing and the second the whole build.
import { log } from 'toolhost:host/log@0.1.4';

const ENTRIES = 200_000;

function build() {
  const table = new Array(ENTRIES);
  let state = 2166136261;
  for (let i = 0; i < ENTRIES; i++) {
    // FNV-1a over the index: enough work per entry that it shows.
    state = Math.imul(state ^ i, 16777619) >>> 0;
    table[i] = state;
  }
  return table;
}

const TABLE = build();

export const tool = {
  describe() {
    return {
      nativeName: 'bench.preinit',
      title: undefined,
      description: 'Reads one entry of a table built at initialization.',
      inputSchema: '{"type":"object","properties":{"i":{"type":"integer"},"rebuild":{"type":"boolean"}},"required":["i"]}',
      outputSchema: undefined,
      annotations: { readOnly: true, mutating: false, control: false, idempotent: true, openWorld: false, sourceKind: undefined },
    };
  },
  call(argumentsJson) {
    const { i, rebuild } = JSON.parse(argumentsJson);
    const table = rebuild ? build() : TABLE;
    log('info', rebuild ? 'rebuilt the table' : 'read the snapshot table');
    return { content: String(table[i % ENTRIES]), structured: undefined, resourceRefs: [], effect: undefined };
  },
};
