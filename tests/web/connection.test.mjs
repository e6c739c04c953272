// Connection helpers of the page (web/connection.js), run with `node --test`.
import assert from "node:assert/strict";
import test from "node:test";

import {
  backoffMs,
  describeClose,
  describeMicError,
  describeServerError,
  diagnoseRefusal,
  retryAfterMs,
  streamUrl,
} from "../../web/connection.js";

test("the stream URL follows the page's scheme, host and path prefix", () => {
  assert.equal(streamUrl("http://127.0.0.1:8765/", ""), "ws://127.0.0.1:8765/v1/stream");
  assert.equal(streamUrl("https://example.org/kettle/index.html?x=1", "k y&z"),
    "wss://example.org/kettle/v1/stream?token=k+y%26z");
  assert.equal(streamUrl("http://h:1/?capture_rate=48000#top", null), "ws://h:1/v1/stream");
});

test("backoff doubles from 0.5 s to a 10 s ceiling with bounded jitter", () => {
  const mid = () => 0.5;
  assert.deepEqual([0, 1, 2, 3, 4, 5, 9].map((a) => backoffMs(a, mid)), [500, 1000, 2000, 4000, 8000, 10000, 10000]);
  assert.equal(backoffMs(0, () => 0), 400);
  assert.equal(backoffMs(0, () => 0.999999), 600);
});

test("Retry-After in whole seconds", () => {
  assert.equal(retryAfterMs("3"), 3000);
  assert.equal(retryAfterMs(" 0 "), 0);
  assert.equal(retryAfterMs(null), null);
  assert.equal(retryAfterMs("soon"), null);
  assert.equal(retryAfterMs("100000"), 300000); // capped: a page should not wait for hours
});

function fakeFetch(routes) {
  const calls = [];
  const fn = async (url) => {
    calls.push(url);
    const path = new URL(url).pathname + new URL(url).search;
    const answer = routes[path] ?? routes[new URL(url).pathname];
    if (answer instanceof Error) throw answer;
    if (!answer) throw new Error(`unexpected ${url}`);
    return { status: answer.status, headers: new Map(Object.entries(answer.headers ?? {})) };
  };
  return { fn, calls };
}

test("a refused handshake is diagnosed by readyz and a plain GET of the stream path", async () => {
  const page = "http://127.0.0.1:9/";
  let f = fakeFetch({ "/readyz": { status: 200 }, "/v1/stream?token=bad": { status: 401 } });
  assert.deepEqual(await diagnoseRefusal(page, "bad", f.fn), { kind: "auth", retryAfterMs: null });
  assert.deepEqual(f.calls, ["http://127.0.0.1:9/readyz", "http://127.0.0.1:9/v1/stream?token=bad"]);

  f = fakeFetch({ "/readyz": { status: 503, headers: { "Retry-After": "2" } } });
  assert.deepEqual(await diagnoseRefusal(page, "", f.fn), { kind: "full", retryAfterMs: 2000 });
  assert.equal(f.calls.length, 1);

  f = fakeFetch({ "/readyz": { status: 200 }, "/v1/stream": { status: 503, headers: { "Retry-After": "1" } } });
  assert.deepEqual(await diagnoseRefusal(page, "", f.fn), { kind: "full", retryAfterMs: 1000 });

  f = fakeFetch({ "/readyz": { status: 200 }, "/v1/stream": { status: 426 } });
  assert.deepEqual(await diagnoseRefusal(page, "", f.fn), { kind: "other", retryAfterMs: null });

  f = fakeFetch({ "/readyz": new TypeError("Failed to fetch") });
  assert.deepEqual(await diagnoseRefusal(page, "", f.fn), { kind: "unreachable", retryAfterMs: null });
});

test("messages in plain words", () => {
  assert.match(describeMicError({ name: "NotAllowedError" }), /permission was denied/);
  assert.match(describeMicError({ name: "NotFoundError" }), /No microphone/);
  assert.match(describeMicError(new Error("boom")), /could not be started: boom/);
  assert.match(describeServerError({ code: "overloaded", message: "x" }), /busy/);
  assert.match(describeServerError({ code: "bad_audio", message: "frame too large" }), /dropped some audio: frame too large/);
  assert.match(describeServerError({ code: "new_code", message: "m" }), /new_code: m/);
  assert.match(describeClose(1001, ""), /shutting down/);
  assert.match(describeClose(1006, ""), /lost/);
  assert.match(describeClose(4000, "why"), /code 4000\) \(why\)|code 4000.*why/);
});
