export { HttpError, HttpErrorCode } from './http.js';
