// `log` capability (toolhost:host/log@0.1.4): diagnostics for the host's
// log, never shown to the model. The host bounds the text per call.
// Every message is made well formed first: a lone surrogate would trap.
import { log } from 'toolhost:host/log@0.1.4';
import { wellFormed } from './utf8.js';

export const trace = (message) => log('trace', wellFormed(message));
export const debug = (message) => log('debug', wellFormed(message));
export const info = (message) => log('info', wellFormed(message));
export const warn = (message) => log('warn', wellFormed(message));
export const error = (message) => log('error', wellFormed(message));
