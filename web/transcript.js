// The page's transcript: finals and open partials on one timeline, plus .txt/.srt export.
// Pure (no DOM), so node tests can check it.
//
// A `revision` (docs/protocol.md#revision) replaces the text, words and times of a final of the
// current session in place, so the exports hold the refined transcript. Utterance numbers restart
// with every session, so a revision can only reach the finals of the session it came on, and none
// after that session's `done`.
//
// Every WebSocket session counts its audio from 0. After a reconnect, or a second recording,
// the page starts a new session at a known offset on its own timeline, so times stay
// increasing: every time stored here is page-timeline seconds.

/** "m:ss.s" under an hour, "h:mm:ss" above. */
export function formatClock(seconds) {
  // Round once, in tenths, so 59.96 s reads 1:00.0 and never 0:60.0.
  const tenths = Math.round(Math.max(0, seconds) * 10);
  const h = Math.floor(tenths / 36000);
  const m = Math.floor((tenths % 36000) / 600);
  const t = tenths % 600; // tenths of a second within the minute
  if (h > 0) return `${h}:${String(m).padStart(2, "0")}:${String(Math.floor(t / 10)).padStart(2, "0")}`;
  return `${m}:${String(Math.floor(t / 10)).padStart(2, "0")}.${t % 10}`;
}

/** SubRip time stamp "HH:MM:SS,mmm". */
export function srtTime(seconds) {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const h = Math.floor(ms / 3600000);
  const m = Math.floor((ms % 3600000) / 60000);
  const s = Math.floor((ms % 60000) / 1000);
  const pad = (v, n = 2) => String(v).padStart(n, "0");
  return `${pad(h)}:${pad(m)}:${pad(s)},${pad(ms % 1000, 3)}`;
}

/**
 * Split a partial's text into the stable words (as written in `text`) and the unstable tail.
 * `stable` holds the first words of `text` up to case and punctuation (docs/protocol.md#partial),
 * so the split counts words instead of matching characters.
 */
export function splitPartial(text, stable) {
  const words = (text || "").trim().split(/\s+/).filter(Boolean);
  const k = Math.min(words.length, (stable || "").trim().split(/\s+/).filter(Boolean).length);
  return { stable: words.slice(0, k).join(" "), tail: words.slice(k).join(" ") };
}

/** Speakers are 0-based on the wire and 1-based for people: 0 -> "Speaker 1". */
export function speakerName(speaker) {
  return `Speaker ${speaker + 1}`;
}

export const SPEAKER_COLOURS = 6; // style.css has this many speaker colours; they cycle

/** The colour slot of a speaker (0 .. SPEAKER_COLOURS-1). */
export function speakerColour(speaker) {
  return ((speaker % SPEAKER_COLOURS) + SPEAKER_COLOURS) % SPEAKER_COLOURS;
}

/**
 * Whether final `f` shows its speaker: it has one, and the final before it (`prev`, or none)
 * had another, like a chat transcript that names a speaker once per turn.
 */
export function showsSpeaker(f, prev) {
  return Number.isInteger(f?.speaker) && (!prev || prev.speaker !== f.speaker);
}

export class Transcript {
  constructor() {
    this.clear();
  }

  clear() {
    /**
     * @type {{id: number, start: number, end: number, text: string, words: object[],
     *   language?: string, speaker?: number, revisions: number}[]}
     */
    this.finals = [];
    this._byUtterance = new Map(); // utterance -> final, for the current session only
    this._nextId = 0;
    this._partials = new Map(); // utterance -> partial, for the current session only
    this._session = 0;
    this._offset = 0;
  }

  /** A new server session whose audio starts at `offsetSeconds` on the page timeline. */
  beginSession(offsetSeconds) {
    this._session += 1;
    this._offset = offsetSeconds;
    this._finalized = new Set();
    this._byUtterance = new Map();
    // Open utterances of an older session are gone with it; resent audio brings them back.
    this._partials.clear();
    return this._session;
  }

  /** Apply a `partial` message; returns the stored partial, or null if it came too late. */
  partial(msg) {
    if (this._finalized?.has(msg.utterance)) return null;
    const p = {
      utterance: msg.utterance,
      start: this._offset + msg.start,
      end: this._offset + msg.end,
      ...splitPartial(msg.text, msg.stable),
    };
    this._partials.set(msg.utterance, p);
    return p;
  }

  /** Apply a `final` message; returns the stored final (page timeline). */
  final(msg) {
    this._finalized?.add(msg.utterance);
    this._partials.delete(msg.utterance);
    const f = {
      id: this._nextId++,
      start: this._offset + msg.start,
      end: this._offset + msg.end,
      text: (msg.text || "").trim(),
      words: this._words(msg.words),
      language: msg.language,
      revisions: 0,
    };
    if (msg.speaker !== undefined) f.speaker = msg.speaker;
    this.finals.push(f);
    this._byUtterance.set(msg.utterance, f);
    return f;
  }

  /**
   * Apply a `revision` message: the final of that utterance takes its text, words, times,
   * language and speaker. Returns {final, before} (`before`: the text it replaced), or null
   * when no final of the current session has that number (unknown, or the session is done).
   */
  revision(msg) {
    const f = this._byUtterance.get(msg?.utterance);
    if (!f || typeof msg.text !== "string") return null;
    const before = f.text;
    f.text = msg.text.trim();
    if (Array.isArray(msg.words)) f.words = this._words(msg.words);
    if (Number.isFinite(msg.start)) f.start = this._offset + msg.start;
    if (Number.isFinite(msg.end)) f.end = this._offset + msg.end;
    if (msg.language !== undefined) f.language = msg.language;
    if (msg.speaker !== undefined) f.speaker = msg.speaker;
    f.revisions += 1;
    return { final: f, before };
  }

  /** The session's `done` came (or it closed): no revision reaches its finals any more. */
  endSession() {
    this._byUtterance = new Map();
  }

  // Word times on the page timeline.
  _words(list) {
    if (!Array.isArray(list)) return [];
    return list.map((w) => ({
      ...w,
      start: Number.isFinite(w?.start) ? this._offset + w.start : w?.start,
      end: Number.isFinite(w?.end) ? this._offset + w.end : w?.end,
    }));
  }

  /** Open partials in utterance order. */
  pending() {
    return [...this._partials.values()].sort((a, b) => a.utterance - b.utterance);
  }

  /** Drop open partials (the session ended). */
  dropPending() {
    this._partials.clear();
  }

  /** The finals just before and after `f` (null at either end). */
  neighbours(f) {
    const i = this.finals.indexOf(f);
    return { prev: i > 0 ? this.finals[i - 1] : null, next: i >= 0 ? (this.finals[i + 1] ?? null) : null };
  }

  get isEmpty() {
    return this.finals.length === 0;
  }

  /**
   * Plain text: one utterance per line; with speakers, one "[Speaker N] ..." line per turn
   * (as `kettle transcribe --diarize` writes .txt).
   */
  toText() {
    const lines = [];
    let prev = null;
    for (const f of this.finals.filter((x) => x.text)) {
      if (!Number.isInteger(f.speaker)) lines.push(f.text);
      else if (prev && prev.speaker === f.speaker && lines.length) lines[lines.length - 1] += ` ${f.text}`;
      else lines.push(`[${speakerName(f.speaker)}] ${f.text}`);
      prev = f;
    }
    return lines.length ? lines.join("\n") + "\n" : "";
  }

  /** SubRip subtitles: one cue per utterance, "[Speaker N] " before it with speakers. */
  toSrt() {
    const cues = this.finals
      .filter((f) => f.text)
      .map((f, i) => {
        const end = Math.max(f.end, f.start + 0.001);
        const who = Number.isInteger(f.speaker) ? `[${speakerName(f.speaker)}] ` : "";
        return `${i + 1}\n${srtTime(f.start)} --> ${srtTime(end)}\n${who}${f.text}\n`;
      });
    return cues.join("\n");
  }
}
