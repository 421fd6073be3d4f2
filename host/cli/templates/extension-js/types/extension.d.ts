// world local:extension/extension
export type * as ToolhostHostLog014 from './interfaces/toolhost-host-log.js'; // import toolhost:host/log@0.1.4
export type * as ToolhostHostRandom014 from './interfaces/toolhost-host-random.js'; // import toolhost:host/random@0.1.4
export type * as ToolhostToolTypes010 from './interfaces/toolhost-tool-types.js'; // import toolhost:tool/types@0.1.0
export * as tool from './interfaces/toolhost-tool-tool.js'; // export toolhost:tool/tool@0.1.0
