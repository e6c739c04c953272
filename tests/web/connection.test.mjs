// Connection helpers of the page (web/connection.js), run with `node --test`.
import assert from "node:assert/strict";
import test from "node:test";

import {
  backoffMs,
  describeClose,
  describeMicError,
  describeServerError,
  diagnoseRefusal,
  fetchInfo,
  keyIsSendable,
  retryAfterMs,
  streamProtocols,
  streamUrl,
} from "../../web/connection.js";

test("the stream URL follows the page's scheme, host and path prefix, and never holds a key", () => {
  assert.equal(streamUrl("http://127.0.0.1:8765/"), "ws://127.0.0.1:8765/v1/stream");
  assert.equal(streamUrl("https://example.org/kettle/index.html?x=1"), "wss://example.org/kettle/v1/stream");
  assert.equal(streamUrl("http://h:1/?capture_rate=48000#top"), "ws://h:1/v1/stream");
});

test("the key travels as a subprotocol next to kettle.v1", () => {
  assert.deepEqual(streamProtocols(""), ["kettle.v1"]);
  assert.deepEqual(streamProtocols(null), ["kettle.v1"]);
  assert.deepEqual(streamProtocols("sk-A1_b.c~"), ["kettle.v1", "kettle-key.sk-A1_b.c~"]);
  assert.ok(keyIsSendable("abc-123"));
  for (const bad of ["a b", "a,b", 'a"b', "ä", "a/b", "a=b"]) {
    assert.ok(!keyIsSendable(bad), bad);
    assert.throws(() => streamProtocols(bad), SyntaxError);
  }
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
  const fn = async (url, options = {}) => {
    calls.push({ url, auth: options.headers?.Authorization ?? null });
    const answer = routes[new URL(url).pathname];
    if (answer instanceof Error) throw answer;
    if (!answer) throw new Error(`unexpected ${url}`);
    return {
      status: answer.status,
      headers: new Map(Object.entries(answer.headers ?? {})),
      json: async () => {
        if (answer.body === undefined) throw new SyntaxError("not JSON");
        return answer.body;
      },
    };
  };
  return { fn, calls };
}

const INFO = { model: "tiny.en", multilingual: false, ready: true, auth: { required: true } };

test("server info is fetched with the key in a header, and tells a missing or wrong key", async () => {
  const page = "http://127.0.0.1:9/kettle/";
  let f = fakeFetch({ "/kettle/v1/info": { status: 200, body: INFO } });
  assert.deepEqual(await fetchInfo(page, "good", f.fn), { kind: "ok", info: INFO });
  assert.deepEqual(f.calls, [{ url: "http://127.0.0.1:9/kettle/v1/info", auth: "Bearer good" }]);
  assert.equal((await fetchInfo(page, "", f.fn)).kind, "auth"); // a key is required, none given
  assert.equal(f.calls[1].auth, null);

  f = fakeFetch({ "/kettle/v1/info": { status: 401 } });
  assert.deepEqual(await fetchInfo(page, "bad", f.fn), { kind: "auth", info: null });

  const open = { ...INFO, auth: { required: false } };
  f = fakeFetch({ "/kettle/v1/info": { status: 200, body: open } });
  assert.deepEqual(await fetchInfo(page, "", f.fn), { kind: "ok", info: open });

  f = fakeFetch({ "/kettle/v1/info": { status: 404 } });
  assert.equal((await fetchInfo(page, "", f.fn)).kind, "other");
  f = fakeFetch({ "/kettle/v1/info": { status: 200 } }); // not JSON
  assert.equal((await fetchInfo(page, "", f.fn)).kind, "other");
  f = fakeFetch({ "/kettle/v1/info": new TypeError("Failed to fetch") });
  assert.equal((await fetchInfo(page, "", f.fn)).kind, "unreachable");
});

test("a refused handshake is diagnosed by readyz and v1/info, never a session", async () => {
  const page = "http://127.0.0.1:9/";
  let f = fakeFetch({ "/readyz": { status: 200 }, "/v1/info": { status: 401 } });
  assert.deepEqual(await diagnoseRefusal(page, "bad", f.fn), { kind: "auth", retryAfterMs: null });
  assert.deepEqual(f.calls.map((c) => c.url), ["http://127.0.0.1:9/readyz", "http://127.0.0.1:9/v1/info"]);
  assert.ok(f.calls.every((c) => !c.url.includes("bad")), "the key never goes into a URL");

  f = fakeFetch({ "/readyz": { status: 503, headers: { "Retry-After": "2" } } });
  assert.deepEqual(await diagnoseRefusal(page, "", f.fn), { kind: "full", retryAfterMs: 2000 });
  assert.equal(f.calls.length, 1);

  f = fakeFetch({ "/readyz": { status: 200 }, "/v1/info": { status: 200, body: INFO } });
  assert.deepEqual(await diagnoseRefusal(page, "", f.fn), { kind: "auth", retryAfterMs: null });
  assert.deepEqual(await diagnoseRefusal(page, "good", f.fn), { kind: "other", retryAfterMs: null });

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
  assert.match(describeClose(1012, "server shutting down"), /restarting/);
  assert.match(describeClose(4000, "why"), /code 4000\) \(why\)|code 4000.*why/);
});
