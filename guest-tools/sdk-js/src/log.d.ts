/** Log to the host (capability `log`); never shown to the model. */
export function trace(message: string): void;
export function debug(message: string): void;
export function info(message: string): void;
export function warn(message: string): void;
export function error(message: string): void;
