// kettle microphone page: capture, stream to /v1/stream (docs/protocol.md), show the transcript.
//
// Audio path: getUserMedia -> AudioWorklet (capture-worklet.js: resample to 16 kHz, s16le,
// 60 ms frames) -> this thread -> WebSocket binary messages.
// Every frame is also kept until a final covers it, so that after a lost connection the new
// session is sent the audio the old one had not finalized yet: nothing said is lost.
// The page asks for revisions (docs/protocol.md#revision): a later decode may correct a final, and
// transcript.js applies it to the model (so the downloads hold the refined text) while
// transcript-view.js rewrites the line in place.
// With the Speakers box ticked (offered when /v1/info says "speakers": true) the config asks
// for diarize, and each line shows its speaker where the speaker changes.
//
// Query parameters (for testing and diagnosis): capture_rate=44100 forces the AudioContext's
// sample rate (default: the device's own).

import {
  backoffMs,
  describeClose,
  describeMicError,
  describeServerError,
  diagnoseRefusal,
  fetchInfo,
  keyIsSendable,
  streamProtocols,
  streamUrl,
} from "./connection.js";
import { Transcript, formatClock } from "./transcript.js";
import { TranscriptView } from "./transcript-view.js";

const RATE = 16000;
const FRAME_MS = 60;
const KEEP_MAX_S = 60; // unfinalized audio kept for replay after a reconnect
const DONE_TIMEOUT_MS = 60000;
const KEY_STORE = "kettle.apiKey";
const LANG_STORE = "kettle.language";
const VOICE_STORE = "kettle.voiceProcessing";
const SPEAKERS_STORE = "kettle.speakers";

const $ = (id) => document.getElementById(id);
const ui = {
  state: $("state"),
  stateText: $("state-text"),
  model: $("model"),
  start: $("start"),
  stop: $("stop"),
  voice: $("voice-processing"),
  speakersRow: $("speakers-row"),
  speakers: $("speakers"),
  keyRow: $("key-row"),
  key: $("api-key"),
  keyRemember: $("key-remember"),
  langRow: $("lang-row"),
  lang: $("language"),
  level: $("level"),
  levelText: $("level-text"),
  partialLag: $("partial-lag"),
  finalLag: $("final-lag"),
  partialLagMedian: $("partial-lag-median"),
  finalLagMedian: $("final-lag-median"),
  audioTime: $("audio-time"),
  captureRate: $("capture-rate"),
  notice: $("notice"),
  noticeText: $("notice-text"),
  noticeClose: $("notice-close"),
  finals: $("finals"),
  announcer: $("announcer"),
  partial: $("partial"),
  empty: $("empty"),
  downloadTxt: $("download-txt"),
  downloadSrt: $("download-srt"),
  clear: $("clear"),
};

const transcript = new Transcript();
const view = new TranscriptView(ui.finals, ui.announcer);
const params = new URLSearchParams(location.search);

// ---------------------------------------------------------------- small UI helpers

function setState(kind, text) {
  ui.state.dataset.state = kind;
  ui.stateText.textContent = text;
}

let noticeTimer = 0;
function notify(text, level = "error", autoHideMs = 0) {
  clearTimeout(noticeTimer);
  ui.notice.dataset.level = level;
  ui.noticeText.textContent = text;
  ui.notice.hidden = false;
  if (autoHideMs) noticeTimer = setTimeout(clearNotice, autoHideMs);
}
function clearNotice() {
  clearTimeout(noticeTimer);
  ui.notice.hidden = true;
  ui.noticeText.textContent = "";
}

function setButtons() {
  const busy = rec !== null;
  ui.start.disabled = busy;
  ui.stop.disabled = !busy || rec.stopping;
  ui.voice.disabled = busy;
  ui.lang.disabled = busy;
  const empty = transcript.isEmpty;
  ui.downloadTxt.disabled = empty;
  ui.downloadSrt.disabled = empty;
  ui.clear.disabled = empty || busy;
}

function fmtLag(seconds) {
  return `${Math.max(0, seconds).toFixed(2)} s`;
}

function median(values) {
  if (!values.length) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

// ---------------------------------------------------------------- settings

function storedKey() {
  return sessionStorage.getItem(KEY_STORE) ?? localStorage.getItem(KEY_STORE) ?? "";
}

function saveKey() {
  const key = ui.key.value.trim();
  sessionStorage.removeItem(KEY_STORE);
  localStorage.removeItem(KEY_STORE);
  if (key) (ui.keyRemember.checked ? localStorage : sessionStorage).setItem(KEY_STORE, key);
}

function showKeyField(message) {
  ui.keyRow.hidden = false;
  if (message) notify(message, "error");
  ui.key.focus();
}

function applyServerInfo(ready) {
  ui.model.textContent = ready.model ? `model ${ready.model}` : "";
  ui.langRow.hidden = !ready.multilingual;
  // /v1/info says whether the server has a speaker model; `ready` does not (left as it is).
  if (typeof ready.speakers === "boolean") ui.speakersRow.hidden = !ready.speakers;
}

function diarize() {
  return !ui.speakersRow.hidden && ui.speakers.checked;
}

// The server refused diarize (no speaker model after all): the session goes on without.
function speakersRefused(s, msg) {
  if (!s.diarize || msg.code !== "bad_message" || !/diariz|speaker/i.test(msg.message || "")) return false;
  s.diarize = false;
  ui.speakersRow.hidden = true;
  notify("This server cannot label speakers; transcribing without them.", "warn", 8000);
  return true;
}

function language() {
  return !ui.langRow.hidden && ui.lang.value ? ui.lang.value : null;
}

// ---------------------------------------------------------------- transcript view

function renderPending() {
  ui.partial.replaceChildren();
  for (const p of transcript.pending()) {
    const line = document.createElement("p");
    const time = document.createElement("time");
    time.textContent = formatClock(p.start);
    const stable = document.createElement("span");
    stable.className = "stable";
    stable.textContent = p.stable;
    const tail = document.createElement("span");
    tail.className = "unstable";
    tail.textContent = p.tail;
    line.append(time, " ", stable, p.stable && p.tail ? " " : "", tail);
    ui.partial.append(line);
  }
  if (transcript.pending().length) ui.empty.hidden = true;
  ui.partial.scrollIntoView?.({ block: "nearest" });
}

function rerenderAll() {
  view.renderAll(transcript.finals);
  renderPending();
  ui.empty.hidden = !transcript.isEmpty || transcript.pending().length > 0;
}

// ---------------------------------------------------------------- recording

/**
 * One recording: the microphone, the worklet, and a chain of server sessions.
 * Samples are counted on the page timeline (16 kHz) across recordings, so a second recording
 * continues the transcript's clock instead of restarting it.
 */
let rec = null;
let timelineSamples = 0; // page-timeline samples of all finished recordings

function newRecording() {
  return {
    base: timelineSamples, // timeline sample where this recording starts
    captured: 0, // samples captured in this recording
    captureStartMs: null, // performance.now() of this recording's first sample
    kept: [], // [{start, pcm}] timeline-sample chunks not yet covered by a final
    committed: timelineSamples, // timeline sample up to which finals cover the audio
    session: null,
    attempt: 0, // reconnect attempts since the last good session
    reconnectTimer: 0,
    stopping: false,
    flushed: false,
    doneTimer: 0,
    partialLags: [],
    finalLags: [],
    stream: null,
    context: null,
    node: null,
    meterPeak: 0,
  };
}

async function start() {
  if (rec) return;
  clearNotice();
  if (!navigator.mediaDevices?.getUserMedia || typeof AudioWorkletNode === "undefined") {
    notify("This browser cannot record here: the microphone needs https:// (or localhost) and a current browser.");
    return;
  }
  if (!ui.keyRow.hidden && !ui.key.value.trim()) {
    // The server wants a key: ask for it before opening the microphone for nothing.
    showKeyField("Enter the API key first.");
    return;
  }
  saveKey();
  if (!keyIsSendable(storedKey() || "k")) {
    showKeyField("This key has characters a browser cannot send (spaces, quotes, commas…). Check it.");
    return;
  }
  rec = newRecording();
  setButtons();
  setState("connecting", "Opening the microphone…");
  const voice = ui.voice.checked;
  try {
    rec.stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: voice, noiseSuppression: voice, autoGainControl: voice, channelCount: 1 },
      video: false,
    });
  } catch (err) {
    rec = null;
    setButtons();
    setState("idle", "Idle");
    notify(describeMicError(err));
    return;
  }
  try {
    const forced = Number.parseInt(params.get("capture_rate") || "", 10);
    rec.context = new AudioContext(forced > 0 ? { sampleRate: forced } : {});
    await rec.context.audioWorklet.addModule(new URL("capture-worklet.js", import.meta.url));
    const source = rec.context.createMediaStreamSource(rec.stream);
    rec.node = new AudioWorkletNode(rec.context, "kettle-capture", {
      numberOfInputs: 1,
      numberOfOutputs: 1,
      outputChannelCount: [1],
      processorOptions: { frameMs: FRAME_MS },
    });
    const thisRec = rec;
    rec.node.port.onmessage = (event) => onWorkletMessage(thisRec, event.data);
    source.connect(rec.node);
    // The node writes silence; connecting it keeps the graph pulling it on every browser.
    rec.node.connect(rec.context.destination);
    await rec.context.resume();
    const khz = rec.context.sampleRate / 1000;
    ui.captureRate.textContent = `${Number.isInteger(khz) ? khz : khz.toFixed(1)} → 16 kHz`;
  } catch (err) {
    releaseAudio(rec);
    rec = null;
    setButtons();
    setState("idle", "Idle");
    notify(`Audio processing could not start: ${err?.message || err}`);
    return;
  }
  for (const el of [ui.partialLag, ui.finalLag]) el.textContent = "–";
  for (const el of [ui.partialLagMedian, ui.finalLagMedian]) el.textContent = "";
  openSession(rec);
}

function stop() {
  if (!rec || rec.stopping) return;
  rec.stopping = true;
  setButtons();
  setState("stopping", "Finishing…");
  // The worklet hands over its last samples, then "flushed" sends `stop`. A suspended
  // context may never answer, so after a second `stop` goes without them.
  const thisRec = rec;
  if (rec.node) {
    rec.node.port.postMessage({ type: "flush" });
    setTimeout(() => rec === thisRec && !thisRec.flushed && onFlushed(thisRec), 1000);
  } else {
    onFlushed(rec);
  }
  rec.doneTimer = setTimeout(() => {
    if (rec !== thisRec) return;
    notify("The server did not confirm the end of the recording; the last words may be missing.");
    finishRecording();
  }, DONE_TIMEOUT_MS);
}

function onWorkletMessage(r, msg) {
  if (r !== rec) return;
  if (msg.type === "frame") onFrame(r, new Int16Array(msg.pcm), msg.peak);
  else if (msg.type === "flushed") onFlushed(r);
}

function onFrame(r, pcm, peak) {
  const now = performance.now();
  if (r.captureStartMs === null) r.captureStartMs = now - (pcm.length / RATE) * 1000;
  r.kept.push({ start: r.base + r.captured, pcm });
  r.captured += pcm.length;
  trimKept(r);
  pump(r);
  showLevel(r, peak);
  ui.audioTime.textContent = formatClock(r.captured / RATE);
}

function onFlushed(r) {
  if (r.flushed) return;
  r.flushed = true;
  releaseAudio(r);
  showLevel(r, 0, true);
  const s = r.session;
  if (s?.open) {
    pump(r);
    s.ws.send(JSON.stringify({ type: "stop" }));
    s.stopSent = true;
  }
  // Not connected: the reconnect sends the kept audio and then `stop`.
}

function releaseAudio(r) {
  r.stream?.getTracks().forEach((t) => t.stop());
  r.node?.port.close();
  r.node?.disconnect();
  r.context?.close().catch(() => {});
  r.stream = r.node = r.context = null;
}

function trimKept(r) {
  // Audio before the last final's end is transcribed for good; beyond KEEP_MAX_S the oldest
  // goes too (a very long outage), and the next session starts later.
  const limit = Math.max(r.committed, r.base + r.captured - KEEP_MAX_S * RATE);
  while (r.kept.length && r.kept[0].start + r.kept[0].pcm.length <= limit) r.kept.shift();
}

// Send every kept sample this session has not had yet.
function pump(r) {
  const s = r.session;
  if (!s?.open || s.stopSent) return;
  for (const chunk of r.kept) {
    const end = chunk.start + chunk.pcm.length;
    if (end <= s.sent) continue;
    const from = Math.max(0, s.sent - chunk.start);
    s.ws.send(from === 0 ? chunk.pcm : chunk.pcm.subarray(from));
    s.sent = end;
  }
}

let meterRaf = 0;
function showLevel(r, peak, reset = false) {
  // Peak hold with decay, drawn on animation frames; dB scale from -60 to 0 dBFS.
  r.meterPeak = reset ? 0 : Math.max(peak, r.meterPeak * 0.85);
  const db = r.meterPeak > 0 ? 20 * Math.log10(r.meterPeak) : -Infinity;
  if (meterRaf) return;
  meterRaf = requestAnimationFrame(() => {
    meterRaf = 0;
    ui.level.value = Number.isFinite(db) ? Math.min(1, Math.max(0, (db + 60) / 60)) : 0;
    ui.levelText.textContent = Number.isFinite(db) && db > -60 ? `${Math.round(db)} dB` : "silent";
    ui.level.classList.toggle("clipping", r.meterPeak >= 0.99);
  });
}

// ---------------------------------------------------------------- sessions

function openSession(r) {
  const offset = Math.max(r.committed, r.kept.length ? r.kept[0].start : r.base + r.captured);
  const s = {
    ws: new WebSocket(streamUrl(location.href), streamProtocols(storedKey())),
    offset, // timeline sample where this session's audio clock starts
    sent: offset,
    open: false,
    ready: false,
    done: null,
    stopSent: false,
    diarize: diarize(),
  };
  s.ws.binaryType = "arraybuffer";
  r.session = s;
  transcript.beginSession(offset / RATE);
  renderPending();
  setState("connecting", r.attempt ? `Reconnecting (attempt ${r.attempt + 1})…` : "Connecting…");
  s.ws.onopen = () => {
    if (r.session !== s) return;
    s.open = true;
    s.ws.send(
      JSON.stringify({
        type: "config",
        sample_rate: RATE,
        encoding: "pcm_s16le",
        channels: 1,
        language: language(),
        partials: true,
        word_timestamps: true,
        revisions: true, // a later, better decode may correct a final (docs/protocol.md#revision)
        ...(s.diarize ? { diarize: true } : {}), // only when asked: older servers lack it
      }),
    );
    pump(r);
    if (r.flushed) {
      s.ws.send(JSON.stringify({ type: "stop" }));
      s.stopSent = true;
    }
  };
  s.ws.onmessage = (event) => {
    if (r.session !== s || typeof event.data !== "string") return;
    let msg;
    try {
      msg = JSON.parse(event.data);
    } catch {
      return; // not ours to crash on; the protocol only sends JSON
    }
    onServerMessage(r, s, msg);
  };
  s.ws.onclose = (event) => {
    if (r.session === s) onSessionClosed(r, s, event);
  };
}

function onServerMessage(r, s, msg) {
  const now = performance.now();
  const lag = (end) => (now - (r.captureStartMs + ((s.offset + end * RATE - r.base) / RATE) * 1000)) / 1000;
  switch (msg.type) {
    case "ready":
      s.ready = true;
      applyServerInfo(msg);
      sessionStorage.setItem("kettle.server", JSON.stringify({ ...msg, speakers: !ui.speakersRow.hidden }));
      if (r.attempt > 0) notify("Reconnected. The audio from the break has been sent again.", "info", 5000);
      else if (ui.notice.dataset.level !== "error") clearNotice();
      r.attempt = 0;
      setState(r.stopping ? "stopping" : "live", r.stopping ? "Finishing…" : "Live");
      break;
    case "partial": {
      if (!transcript.partial(msg)) break;
      renderPending();
      if (r.captureStartMs !== null) {
        const l = lag(msg.end);
        r.partialLags.push(l);
        ui.partialLag.textContent = fmtLag(l);
        ui.partialLagMedian.textContent = `median ${fmtLag(median(r.partialLags))}`;
      }
      break;
    }
    case "final": {
      const f = transcript.final(msg);
      view.add(f, transcript.neighbours(f).prev);
      ui.empty.hidden = true;
      renderPending();
      r.committed = Math.max(r.committed, s.offset + Math.round(msg.end * RATE));
      trimKept(r);
      if (r.captureStartMs !== null) {
        const l = lag(msg.end);
        r.finalLags.push(l);
        ui.finalLag.textContent = fmtLag(l);
        ui.finalLagMedian.textContent = `median ${fmtLag(median(r.finalLags))}`;
      }
      setButtons();
      break;
    }
    case "revision": {
      // Only for a final of this session, before its `done`; anything else is ignored.
      const revised = s.done ? null : transcript.revision(msg);
      if (revised) {
        view.revise(revised.final, revised.before);
        // A new speaker may start or end a turn here: this line's label and the next one's.
        const { prev, next } = transcript.neighbours(revised.final);
        view.relabel(revised.final, prev);
        if (next) view.relabel(next, revised.final);
      }
      break;
    }
    case "error":
      if (speakersRefused(s, msg)) break;
      notify(describeServerError(msg), msg.code === "overloaded" ? "warn" : "error", msg.code === "overloaded" ? 8000 : 0);
      break;
    case "done":
      s.done = msg;
      transcript.endSession();
      break;
    default:
      break; // newer servers may add message types; ignore them
  }
}

async function onSessionClosed(r, s, event) {
  r.session = null;
  transcript.endSession();
  transcript.dropPending();
  renderPending();
  if (s.done) {
    const d = s.done;
    const n = d.utterances === 1 ? "1 utterance" : `${d.utterances} utterances`;
    const idle = d.reason === "idle" ? " (the server ended the idle session)" : "";
    notify(`Done: ${formatClock(d.audio_seconds)} of audio, ${n}${idle}.`, "info");
    finishRecording();
    return;
  }
  let message;
  let delay = backoffMs(r.attempt);
  if (!s.open) {
    // Refused at the handshake: the browser hides the status, so ask the server (connection.js).
    setState("connecting", "Checking the server…");
    const why = await diagnoseRefusal(location.href, storedKey());
    if (rec !== r) return;
    if (why.kind === "auth") {
      finishRecording();
      showKeyField(storedKey() ? "The server refused the API key. Check it and press Start again." : "This server needs an API key. Enter it and press Start.");
      setState("error", "Key refused");
      return;
    }
    if (why.kind === "full") {
      delay = why.retryAfterMs ?? delay;
      message = "The server is full (all sessions in use) or still loading.";
    } else if (why.kind === "unreachable") {
      message = "The server cannot be reached.";
    } else {
      message = "The connection could not be opened.";
    }
  } else {
    message = describeClose(event.code, event.reason);
  }
  scheduleReconnect(r, message, delay);
}

function scheduleReconnect(r, message, delay) {
  r.attempt += 1;
  const at = performance.now() + delay;
  setState("reconnecting", "Reconnecting");
  const kept = r.flushed ? "Your audio is kept and will be sent when the connection is back." : "Recording goes on; the audio is kept and sent when the connection is back.";
  const tick = () => {
    if (rec !== r) return;
    const left = Math.max(0, Math.ceil((at - performance.now()) / 1000));
    const when = left > 0 ? `Reconnecting in ${left} s` : "Reconnecting now";
    notify(`${message} ${when} (attempt ${r.attempt}). ${kept}`, "warn");
    if (left > 0) r.reconnectTimer = setTimeout(tick, Math.min(1000, at - performance.now()));
    else openSession(r);
  };
  tick();
}

function finishRecording() {
  const r = rec;
  if (!r) return;
  clearTimeout(r.reconnectTimer);
  clearTimeout(r.doneTimer);
  releaseAudio(r);
  if (r.session) {
    r.session.ws.onclose = null;
    r.session.ws.close(1000);
  }
  timelineSamples = r.base + r.captured;
  rec = null;
  showLevel(r, 0, true);
  setState("idle", "Idle");
  setButtons();
}

// ---------------------------------------------------------------- hello: learn the model early

// GET v1/info at page load tells the page the model (and whether to offer languages) and
// whether a key is needed or refused, before anyone presses Start. It opens no session.
async function hello() {
  setState("connecting", "Connecting…");
  const key = storedKey();
  const got = await fetchInfo(location.href, key);
  if (rec) return;
  if (got.kind === "ok") {
    applyServerInfo(got.info);
    const { model, multilingual, speakers } = got.info;
    sessionStorage.setItem("kettle.server", JSON.stringify({ model, multilingual, speakers }));
    if (got.info.ready) {
      setState("idle", "Ready");
    } else {
      setState("error", "Server busy");
      notify("The server is full (all sessions in use) or still loading. Press Start to try again.", "warn");
    }
  } else if (got.kind === "auth") {
    setState("error", "Key needed");
    showKeyField(key ? "The server refused the saved API key. Enter a valid one." : "This server needs an API key. Enter it to start.");
  } else {
    setState("error", "Offline");
    notify("The server cannot be reached. Check that kettle is running, then reload.", "warn");
  }
}

// ---------------------------------------------------------------- downloads

function download(text, type, ext) {
  const stamp = new Date().toISOString().replace(/[:T]/g, "-").slice(0, 19);
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement("a");
  a.href = url;
  a.download = `kettle-${stamp}.${ext}`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

// ---------------------------------------------------------------- wiring

function init() {
  const key = storedKey();
  ui.key.value = key;
  ui.keyRemember.checked = Boolean(localStorage.getItem(KEY_STORE));
  ui.keyRow.hidden = !key;
  ui.voice.checked = localStorage.getItem(VOICE_STORE) === "1";
  ui.speakers.checked = localStorage.getItem(SPEAKERS_STORE) === "1";
  ui.lang.value = localStorage.getItem(LANG_STORE) ?? "";
  const cached = sessionStorage.getItem("kettle.server");
  if (cached) {
    try {
      applyServerInfo(JSON.parse(cached));
    } catch {
      sessionStorage.removeItem("kettle.server");
    }
  }
  ui.start.addEventListener("click", start);
  ui.stop.addEventListener("click", stop);
  ui.voice.addEventListener("change", () => localStorage.setItem(VOICE_STORE, ui.voice.checked ? "1" : "0"));
  ui.lang.addEventListener("change", () => localStorage.setItem(LANG_STORE, ui.lang.value));
  ui.speakers.addEventListener("change", () => localStorage.setItem(SPEAKERS_STORE, ui.speakers.checked ? "1" : "0"));
  ui.key.addEventListener("change", () => {
    saveKey();
    clearNotice();
    if (!rec) hello();
  });
  ui.keyRemember.addEventListener("change", saveKey);
  // Enter in the key field submits its form: save the key and start.
  ui.keyRow.addEventListener("submit", (e) => {
    e.preventDefault();
    saveKey();
    start();
  });
  ui.noticeClose.addEventListener("click", clearNotice);
  ui.downloadTxt.addEventListener("click", () => download(transcript.toText(), "text/plain;charset=utf-8", "txt"));
  ui.downloadSrt.addEventListener("click", () => download(transcript.toSrt(), "application/x-subrip;charset=utf-8", "srt"));
  ui.clear.addEventListener("click", () => {
    transcript.clear();
    timelineSamples = 0;
    rerenderAll();
    setButtons();
  });
  addEventListener("keydown", (e) => {
    if (e.key === "Escape" && rec && !rec.stopping) stop();
  });
  setButtons();
  setState("idle", "Idle");
  hello();
}

init();
