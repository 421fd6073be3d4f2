// `log` capability (toolhost:host/log@0.1.4): diagnostics for the host's
// log, never shown to the model. The host bounds the text per call.
import { log } from 'toolhost:host/log@0.1.4';

export const trace = (message) => log('trace', String(message));
export const debug = (message) => log('debug', String(message));
export const info = (message) => log('info', String(message));
export const warn = (message) => log('warn', String(message));
export const error = (message) => log('error', String(message));
