// The word-level diff behind a revision's marks and its announcement (web/worddiff.js),
// run with `node --test`.
import assert from "node:assert/strict";
import test from "node:test";

import { describeChanges, diffWords, markChanges, words } from "../../web/worddiff.js";

const changed = (a, b) => markChanges(a, b).filter((w) => w.changed).map((w) => w.word);

test("words split on any white space", () => {
  assert.deepEqual(words("  the\tquick  brown\n"), ["the", "quick", "brown"]);
  assert.deepEqual(words(""), []);
  assert.deepEqual(words(undefined), []);
});

test("one replaced word is the only one marked", () => {
  assert.deepEqual(markChanges("alpha bravo charlie", "alfa bravo charlie"), [
    { word: "alfa", changed: true },
    { word: "bravo", changed: false },
    { word: "charlie", changed: false },
  ]);
  assert.deepEqual(changed("india juliet kilo", "india juliett kilo"), ["juliett"]);
  assert.deepEqual(diffWords("alpha bravo charlie", "alfa bravo charlie"), [
    { op: "delete", words: ["alpha"] },
    { op: "insert", words: ["alfa"] },
    { op: "equal", words: ["bravo", "charlie"] },
  ]);
});

test("the same text marks nothing; white space alone is no change", () => {
  assert.deepEqual(changed("The quick brown fox.", "The quick brown fox."), []);
  assert.deepEqual(changed("The quick  brown fox.", " The quick brown\tfox. "), []);
  assert.deepEqual(diffWords("a b", "a b"), [{ op: "equal", words: ["a", "b"] }]);
  assert.deepEqual(diffWords("", ""), []);
});

test("case and punctuation are changes the reader sees", () => {
  assert.deepEqual(changed("The quick brown fox jumps.", "The quick brown fox jumped."), ["jumped."]);
  assert.deepEqual(changed("hello world", "Hello, world"), ["Hello,"]);
});

test("insertions, deletions and several edits keep the common words", () => {
  assert.deepEqual(changed("the brown fox", "the quick brown fox"), ["quick"]);
  assert.deepEqual(changed("the quick brown fox", "the brown fox"), []);
  assert.deepEqual(changed("a b c d e f", "a x c d y f"), ["x", "y"]);
  assert.deepEqual(changed("", "all new words"), ["all", "new", "words"]);
  assert.deepEqual(changed("all old words", ""), []);
  // Moved words: the longest common subsequence stays, the rest is marked.
  assert.deepEqual(changed("one two three", "three one two"), ["three"]);
  // Every word of the new text is there once, in order.
  const a = "so the the cat sat on on the mat mat";
  const b = "so then the cat sat upon the mat";
  assert.deepEqual(markChanges(a, b).map((w) => w.word), words(b));
});

test("a replaced stretch is its deletions, then its insertions", () => {
  assert.deepEqual(diffWords("x alpha bravo y", "x alfa bravo2 y"), [
    { op: "equal", words: ["x"] },
    { op: "delete", words: ["alpha", "bravo"] },
    { op: "insert", words: ["alfa", "bravo2"] },
    { op: "equal", words: ["y"] },
  ]);
});

test("a very long text with no common middle is marked whole, not aligned cell by cell", () => {
  const a = Array.from({ length: 1000 }, (_, i) => `a${i}`).join(" ");
  const b = Array.from({ length: 1000 }, (_, i) => `b${i}`).join(" ");
  const marks = markChanges(`keep ${a} end`, `keep ${b} end`);
  assert.equal(marks.length, 1002);
  assert.equal(marks.filter((w) => w.changed).length, 1000);
  assert.deepEqual([marks[0], marks[1001]], [
    { word: "keep", changed: false },
    { word: "end", changed: false },
  ]);
});

test("the announcement says only what changed", () => {
  assert.equal(describeChanges("alpha bravo charlie", "alfa bravo charlie"), "alpha to alfa");
  assert.equal(describeChanges("the brown fox", "the quick brown fox"), "added quick");
  assert.equal(describeChanges("the quick brown fox", "the brown fox"), "removed quick");
  assert.equal(
    describeChanges("alpha bravo charlie juliet", "alfa bravo charlie juliett"),
    "alpha to alfa; juliet to juliett",
  );
  assert.equal(describeChanges("same words", "same  words"), null);
  // Many edits read as the new line, not as a list of fragments.
  assert.equal(describeChanges("a b c d e f g h", "x b y d z f w h"), "now reads: x b y d z f w h");
  assert.equal(describeChanges("a b c", ""), "removed a b c");
  assert.equal(describeChanges("a b c d e f g h i j k l m", ""), "removed the line's words");
});
