// Connection helpers for the page: URLs, subprotocols, reconnect backoff, server info and the
// failure diagnosis. Pure apart from `fetchInfo` and `diagnoseRefusal`, which take `fetch` as
// a parameter so tests can fake it.
//
// The API key never goes into a URL (URLs end up in logs and histories): a browser cannot set
// headers on a WebSocket, so the key travels as the subprotocol `kettle-key.<KEY>` next to
// `kettle.v1`, which the server echoes. Plain HTTP requests carry it as `Authorization: Bearer`.
//
// Why a diagnosis is needed: when a WebSocket handshake is refused, the browser reports only
// "closed, code 1006" and never shows the page the HTTP status. To tell a refused key (401)
// from a full server (503), the page then asks the server over plain HTTP:
//   1. GET readyz  -> 503 means the server is full or its model is not loaded yet.
//   2. GET v1/info with the key -> 401 (or 403) means the key is wrong; an info that says a key
//      is required when the page has none means the key is missing; anything else means the
//      key was fine and the failure lay elsewhere (a proxy, the network).
// Probes run only after a failure, so a healthy page makes no extra requests.

export const STREAM_PATH = "v1/stream";
export const INFO_PATH = "v1/info";
export const SUBPROTOCOL = "kettle.v1";
export const KEY_SUBPROTOCOL_PREFIX = "kettle-key.";

/** ws(s)://.../v1/stream, relative to the page so a reverse-proxy prefix works. */
export function streamUrl(pageHref) {
  const url = new URL(STREAM_PATH, pageHref);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.search = "";
  url.hash = "";
  return url.toString();
}

/** Can this key travel as a subprotocol? (RFC 7230 token characters only.) */
export function keyIsSendable(token) {
  return /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(token);
}

/** The WebSocket subprotocols to offer: kettle.v1, and the key when there is one. */
export function streamProtocols(token) {
  if (!token) return [SUBPROTOCOL];
  if (!keyIsSendable(token)) throw new SyntaxError("the API key has characters a browser cannot send");
  return [SUBPROTOCOL, KEY_SUBPROTOCOL_PREFIX + token];
}

function authHeaders(token) {
  return token && keyIsSendable(token) ? { Authorization: `Bearer ${token}` } : {};
}

/**
 * GET v1/info (model, languages, limits; no session is opened). Returns {kind, info}: kind
 * "ok" (info is the server's answer), "auth" (the key is wrong, or missing where one is
 * required), "unreachable" (no HTTP answer) or "other" (an unexpected answer).
 */
export async function fetchInfo(pageHref, token, fetchFn = globalThis.fetch) {
  let answer;
  try {
    answer = await fetchFn(new URL(INFO_PATH, pageHref).toString(), {
      cache: "no-store",
      redirect: "manual",
      headers: authHeaders(token),
    });
  } catch {
    return { kind: "unreachable", info: null };
  }
  if (answer.status === 401 || answer.status === 403) return { kind: "auth", info: null };
  if (answer.status !== 200) return { kind: "other", info: null };
  let info;
  try {
    info = await answer.json();
  } catch {
    return { kind: "other", info: null };
  }
  if (info?.auth?.required && !token) return { kind: "auth", info };
  return { kind: "ok", info };
}

/** Delay before reconnect attempt `attempt` (0-based): 0.5 s doubling to 10 s, +-20 % jitter. */
export function backoffMs(attempt, random = Math.random, baseMs = 500, maxMs = 10000) {
  const plain = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt));
  return Math.round(plain * (0.8 + 0.4 * random()));
}

/**
 * Parse a Retry-After header of whole seconds (the form docs/protocol.md#connecting uses) into ms,
 * or null.
 */
export function retryAfterMs(header) {
  if (header == null) return null;
  const s = Number.parseInt(String(header).trim(), 10);
  return Number.isFinite(s) && s >= 0 ? Math.min(s, 300) * 1000 : null;
}

/**
 * Why was the WebSocket refused? Returns {kind, retryAfterMs}, kind one of
 * "auth" (key missing or wrong), "full" (503: at the session limit or not ready),
 * "unreachable" (no HTTP answer at all), "other" (server fine, cause unknown).
 */
export async function diagnoseRefusal(pageHref, token, fetchFn = globalThis.fetch) {
  let ready;
  try {
    ready = await fetchFn(new URL("readyz", pageHref).toString(), { cache: "no-store", redirect: "manual" });
  } catch {
    return { kind: "unreachable", retryAfterMs: null };
  }
  if (ready.status === 503) return { kind: "full", retryAfterMs: retryAfterMs(ready.headers.get("Retry-After")) };
  const { kind } = await fetchInfo(pageHref, token, fetchFn);
  if (kind === "auth" || kind === "unreachable") return { kind, retryAfterMs: null };
  return { kind: "other", retryAfterMs: null };
}

/** Plain words for a close code on a session that had been open. */
export function describeClose(code, reason) {
  const why = reason ? ` (${reason})` : "";
  switch (code) {
    case 1001:
      return `The server is shutting down${why}.`;
    case 1008:
      return `The server closed the connection: policy${why}.`;
    case 1009:
      return `The server refused a message as too large${why}.`;
    case 1011:
      return `The server hit an internal error${why}.`;
    case 1012:
      return "The server is restarting (it finished this session's text first).";
    case 1006:
      return "The connection was lost.";
    default:
      return `The connection closed (code ${code})${why}.`;
  }
}

/** Plain words for a server `error` message. */
export function describeServerError(msg) {
  const detail = msg.message ? `: ${msg.message}` : "";
  switch (msg.code) {
    case "overloaded":
      return "The server is busy, so live partial text is slowed down. Final text is not affected.";
    case "bad_audio":
      return `The server dropped some audio${detail}`;
    case "bad_message":
      return `The server could not use a message from this page${detail}`;
    case "internal":
      return `The server hit an internal error${detail}`;
    default:
      return `Server error ${msg.code || ""}${detail}`.trim();
  }
}

/** Plain words for a getUserMedia failure. */
export function describeMicError(err) {
  switch (err?.name) {
    case "NotAllowedError":
    case "SecurityError":
      return "Microphone permission was denied. Allow the microphone for this site in the browser's settings, then press Start again.";
    case "NotFoundError":
    case "OverconstrainedError":
      return "No microphone was found. Connect one and press Start again.";
    case "NotReadableError":
    case "AbortError":
      return "The microphone could not be opened; another application may be using it.";
    default:
      return `The microphone could not be started: ${err?.message || err}`;
  }
}
