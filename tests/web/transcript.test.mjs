// The page's transcript model and exports (web/transcript.js), run with `node --test`.
import assert from "node:assert/strict";
import test from "node:test";

import {
  SPEAKER_COLOURS,
  Transcript,
  formatClock,
  showsSpeaker,
  speakerColour,
  speakerName,
  splitPartial,
  srtTime,
} from "../../web/transcript.js";

test("clock and SubRip time stamps", () => {
  assert.equal(formatClock(0), "0:00.0");
  assert.equal(formatClock(3.25), "0:03.3");
  assert.equal(formatClock(59.96), "1:00.0");
  assert.equal(formatClock(75.4), "1:15.4");
  assert.equal(formatClock(3725), "1:02:05");
  assert.equal(formatClock(-1), "0:00.0");
  assert.equal(srtTime(0), "00:00:00,000");
  assert.equal(srtTime(3723.4567), "01:02:03,457");
  assert.equal(srtTime(59.9996), "00:01:00,000");
});

test("a clock value never shows 60 seconds", () => {
  for (const s of [59.95, 59.96, 59.99, 119.97]) {
    const [, sec] = formatClock(s).split(":");
    assert.ok(Number(sec) < 60, `${s} -> ${formatClock(s)}`);
  }
});

test("a partial splits into stable words and the unstable tail by word count", () => {
  assert.deepEqual(splitPartial("The quick brown fox", "the quick"), { stable: "The quick", tail: "brown fox" });
  assert.deepEqual(splitPartial("Hello, world.", "hello world"), { stable: "Hello, world.", tail: "" });
  assert.deepEqual(splitPartial("Nothing stable yet", ""), { stable: "", tail: "Nothing stable yet" });
  assert.deepEqual(splitPartial("", "x"), { stable: "", tail: "" });
});

test("finals and partials across sessions stay on one timeline", () => {
  const t = new Transcript();
  t.beginSession(0);
  t.partial({ utterance: 0, start: 0.5, end: 1.2, text: "hello there", stable: "hello" });
  t.partial({ utterance: 1, start: 2.0, end: 2.4, text: "next", stable: "" });
  assert.deepEqual(t.pending().map((p) => p.utterance), [0, 1]);
  t.final({ utterance: 0, start: 0.5, end: 1.6, text: " Hello there. ", language: "en" });
  assert.deepEqual(t.pending().map((p) => p.utterance), [1]);
  // A late partial of a finalized utterance is ignored.
  assert.equal(t.partial({ utterance: 0, start: 0.5, end: 1.7, text: "hello there again", stable: "" }), null);
  // Reconnect: the new session's clock starts at 10 s on the page's timeline.
  t.beginSession(10);
  assert.equal(t.pending().length, 0);
  t.final({ utterance: 0, start: 0.25, end: 2.0, text: "Second part." });
  assert.deepEqual(t.finals.map((f) => [f.start, f.end, f.text]), [
    [0.5, 1.6, "Hello there."],
    [10.25, 12, "Second part."],
  ]);
  assert.equal(t.toText(), "Hello there.\nSecond part.\n");
  assert.equal(
    t.toSrt(),
    "1\n00:00:00,500 --> 00:00:01,600\nHello there.\n\n2\n00:00:10,250 --> 00:00:12,000\nSecond part.\n",
  );
  t.clear();
  assert.ok(t.isEmpty);
  assert.equal(t.toText(), "");
  assert.equal(t.toSrt(), "");
});

test("empty finals are left out of the exports", () => {
  const t = new Transcript();
  t.beginSession(0);
  t.final({ utterance: 0, start: 0, end: 0, text: "" });
  t.final({ utterance: 1, start: 1, end: 1, text: "Hi." });
  assert.equal(t.toText(), "Hi.\n");
  assert.equal(t.toSrt(), "1\n00:00:01,000 --> 00:00:01,001\nHi.\n");
});

test("a revision replaces its final's text, words and times, and the exports follow", () => {
  const t = new Transcript();
  t.beginSession(0);
  const f0 = t.final({
    utterance: 0,
    start: 0.5,
    end: 1.6,
    text: "alpha bravo",
    words: [
      { word: "alpha", start: 0.5, end: 1.0, probability: 0.9 },
      { word: "bravo", start: 1.0, end: 1.6, probability: 0.9 },
    ],
    language: "en",
  });
  t.final({ utterance: 1, start: 2.0, end: 3.0, text: "charlie delta" });
  const got = t.revision({
    type: "revision",
    utterance: 0,
    start: 0.48,
    end: 1.7,
    text: " alfa bravo ",
    words: [
      { word: "alfa", start: 0.48, end: 1.0, probability: 0.95 },
      { word: "bravo", start: 1.0, end: 1.7, probability: 0.95 },
    ],
    language: "en",
  });
  assert.equal(got.final, f0);
  assert.equal(got.before, "alpha bravo");
  assert.deepEqual([f0.start, f0.end, f0.text, f0.revisions], [0.48, 1.7, "alfa bravo", 1]);
  assert.deepEqual(f0.words.map((w) => [w.word, w.start, w.end]), [
    ["alfa", 0.48, 1.0],
    ["bravo", 1.0, 1.7],
  ]);
  // A second revision replaces the first.
  const again = t.revision({ type: "revision", utterance: 0, start: 0.5, end: 1.7, text: "Alfa, bravo." });
  assert.equal(again.before, "alfa bravo");
  assert.equal(f0.revisions, 2);
  assert.equal(t.toText(), "Alfa, bravo.\ncharlie delta\n");
  assert.equal(
    t.toSrt(),
    "1\n00:00:00,500 --> 00:00:01,700\nAlfa, bravo.\n\n2\n00:00:02,000 --> 00:00:03,000\ncharlie delta\n",
  );
});

test("a revision's times are moved onto the page timeline of its session", () => {
  const t = new Transcript();
  t.beginSession(0);
  t.final({ utterance: 0, start: 0.5, end: 1.5, text: "first" });
  t.beginSession(10); // a reconnect: this session's clock starts at 10 s
  const f = t.final({ utterance: 0, start: 1.0, end: 2.0, text: "alpha", words: [{ word: "alpha", start: 1.0, end: 2.0 }] });
  t.revision({ utterance: 0, start: 0.9, end: 2.25, text: "alfa", words: [{ word: "alfa", start: 0.9, end: 2.25 }] });
  assert.deepEqual([f.start, f.end, f.text], [10.9, 12.25, "alfa"]);
  assert.deepEqual(f.words.map((w) => [w.start, w.end]), [[10.9, 12.25]]);
  // The first session's utterance 0 is untouched: numbers restart with every session.
  assert.deepEqual(t.finals.map((x) => x.text), ["first", "alfa"]);
  assert.equal(t.toSrt(), "1\n00:00:00,500 --> 00:00:01,500\nfirst\n\n2\n00:00:10,900 --> 00:00:12,250\nalfa\n");
});

test("a revision without times or words keeps the final's", () => {
  const t = new Transcript();
  t.beginSession(0);
  const f = t.final({ utterance: 0, start: 1, end: 2, text: "alpha", words: [{ word: "alpha", start: 1, end: 2 }] });
  t.revision({ utterance: 0, text: "alfa" });
  assert.deepEqual([f.start, f.end, f.text, f.words.length], [1, 2, "alfa", 1]);
});

test("revisions for unknown utterances, of an older session or after done are ignored", () => {
  const t = new Transcript();
  t.beginSession(0);
  t.final({ utterance: 0, start: 0, end: 1, text: "alpha" });
  assert.equal(t.revision({ utterance: 7, start: 0, end: 1, text: "nope" }), null);
  assert.equal(t.revision({ start: 0, end: 1, text: "no number" }), null);
  assert.equal(t.revision({ utterance: 0, start: 0, end: 1 }), null); // no text
  assert.equal(t.revision(null), null);
  t.endSession(); // `done`
  assert.equal(t.revision({ utterance: 0, start: 0, end: 1, text: "alfa" }), null);
  t.beginSession(5);
  assert.equal(t.revision({ utterance: 0, start: 0, end: 1, text: "alfa" }), null);
  assert.equal(t.toText(), "alpha\n");
  t.clear();
  assert.equal(t.revision({ utterance: 0, start: 0, end: 1, text: "alfa" }), null);
});

test("a revision to no text leaves the line out of the exports", () => {
  const t = new Transcript();
  t.beginSession(0);
  t.final({ utterance: 0, start: 0, end: 1, text: "uh" });
  t.final({ utterance: 1, start: 1, end: 2, text: "Hi." });
  t.revision({ utterance: 0, start: 0, end: 1, text: "" });
  assert.equal(t.toText(), "Hi.\n");
  assert.equal(t.toSrt(), "1\n00:00:01,000 --> 00:00:02,000\nHi.\n");
});

// --- speakers (diarize) ---

function talk() {
  const t = new Transcript();
  t.beginSession(0);
  t.final({ utterance: 0, start: 0, end: 1, text: "Hi.", speaker: 0 });
  t.final({ utterance: 1, start: 1.5, end: 2, text: "How are you?", speaker: 0 });
  t.final({ utterance: 2, start: 3, end: 4, text: "Fine.", speaker: 1 });
  t.final({ utterance: 3, start: 5, end: 6, text: "Good.", speaker: 0 });
  return t;
}

test("speakers are 1-based for people and their colours cycle", () => {
  assert.equal(speakerName(0), "Speaker 1");
  assert.equal(speakerName(15), "Speaker 16");
  assert.equal(speakerColour(0), 0);
  assert.equal(speakerColour(SPEAKER_COLOURS), 0);
  assert.equal(speakerColour(SPEAKER_COLOURS + 2), 2);
});

test("a final shows its speaker only where the speaker changes", () => {
  const t = talk();
  const shown = t.finals.map((f, i) => showsSpeaker(f, t.finals[i - 1] ?? null));
  assert.deepEqual(shown, [true, false, true, true]);
  assert.equal(showsSpeaker({ text: "x" }, null), false); // no diarize: no label
  assert.deepEqual(t.finals.map((f) => f.speaker), [0, 0, 1, 0]);
});

test("a revision that changes the speaker moves the turns", () => {
  const t = talk();
  const got = t.revision({ utterance: 1, start: 1.5, end: 2, text: "How are you?", speaker: 1 });
  assert.equal(got.final.speaker, 1);
  const { prev, next } = t.neighbours(got.final);
  assert.equal(prev, t.finals[0]);
  assert.equal(next, t.finals[2]);
  assert.equal(showsSpeaker(got.final, prev), true);
  assert.equal(showsSpeaker(next, got.final), false); // "Fine." now continues speaker 2's turn
  assert.deepEqual(t.neighbours(t.finals[0]), { prev: null, next: t.finals[1] });
  // A revision without a speaker field keeps the speaker.
  t.revision({ utterance: 2, text: "Fine, thanks." });
  assert.equal(t.finals[2].speaker, 1);
});

test("downloads carry [Speaker N] as kettle transcribe --diarize does", () => {
  const t = talk();
  assert.equal(t.toText(), "[Speaker 1] Hi. How are you?\n[Speaker 2] Fine.\n[Speaker 1] Good.\n");
  const srt = t.toSrt();
  assert.deepEqual(srt.match(/^\[Speaker \d\] .*$/gm), [
    "[Speaker 1] Hi.",
    "[Speaker 1] How are you?",
    "[Speaker 2] Fine.",
    "[Speaker 1] Good.",
  ]);
  const plain = new Transcript();
  plain.beginSession(0);
  plain.final({ utterance: 0, start: 0, end: 1, text: "Hi." });
  assert.equal(plain.toText(), "Hi.\n");
  assert.ok(!plain.toSrt().includes("Speaker"));
});
