// The console's only door to the broker's JSON API (console-api.md).
// GETs and POSTs go with the session cookie (same origin); POSTs carry the CSRF token from
// /api/session or /api/login in `X-Strata-Csrf`. A 401 from any route but /api/login hands
// control to the login page through the handler app.js registers.

let csrfToken = '';
let unauthorizedHandler = () => {};

export function setCsrf(token) {
  csrfToken = token || '';
}

export function onUnauthorized(handler) {
  unauthorizedHandler = handler;
}

// An error answer: `code` is the broker's CODE (a Kafka error name or UNAUTHENTICATED, ...).
export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message || code);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

export async function request(path, { method = 'GET', body } = {}) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (method !== 'GET') {
    init.headers['Content-Type'] = 'application/json';
    if (csrfToken) init.headers['X-Strata-Csrf'] = csrfToken;
    init.body = JSON.stringify(body ?? {});
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, 'UNAVAILABLE', `the broker did not answer (${err.message})`, null);
  }
  let answer = null;
  try {
    answer = await response.json();
  } catch {
    answer = null;
  }
  if (response.status === 401 && path !== '/api/login') {
    unauthorizedHandler();
  }
  if (!response.ok) {
    const code = answer?.error || `HTTP_${response.status}`;
    throw new ApiError(response.status, code, answer?.message || response.statusText, answer);
  }
  return answer;
}

export const get = (path) => request(path);
export const post = (path, body) => request(path, { method: 'POST', body });

// Path segments are encoded: group ids may hold '/', '?' or '#'.
export const enc = encodeURIComponent;
