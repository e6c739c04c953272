// Which words a revision changed: a word-level diff of a final's old and new text. Pure (no
// DOM), so node tests can check it.
//
// Words are the text split on white space and compared exactly: a change of case or
// punctuation ("fox" to "fox.") is a change the reader sees, so it is marked too.

/** The text's words (split on white space). */
export function words(text) {
  return (text || "").trim().split(/\s+/).filter(Boolean);
}

// Past this many cells the middle part is not aligned word by word (an utterance is a few
// dozen words; this only guards against a pathological message): it is all marked changed.
const MAX_CELLS = 250000;

/**
 * The edit from `oldText` to `newText` as runs in order:
 * [{op: "equal" | "delete" | "insert", words: [...]}]. A replaced stretch is a "delete" run
 * followed by an "insert" run. The words kept are a longest common subsequence.
 */
export function diffWords(oldText, newText) {
  const a = words(oldText);
  const b = words(newText);
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre += 1;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf += 1;
  const midA = a.slice(pre, a.length - suf);
  const midB = b.slice(pre, b.length - suf);
  const ops = [];
  const push = (op, word) => {
    const last = ops[ops.length - 1];
    if (last && last.op === op) last.words.push(word);
    else ops.push({ op, words: [word] });
  };
  for (const w of a.slice(0, pre)) push("equal", w);
  if (midA.length * midB.length > MAX_CELLS) {
    for (const w of midA) push("delete", w);
    for (const w of midB) push("insert", w);
  } else {
    for (const [op, w] of alignMiddle(midA, midB)) push(op, w);
  }
  for (const w of a.slice(a.length - suf)) push("equal", w);
  return ops;
}

// Longest common subsequence by dynamic programming; within a replaced stretch the deletions
// come before the insertions.
function alignMiddle(a, b) {
  const n = a.length;
  const m = b.length;
  // lcs[i][j]: length of the LCS of a[i:] and b[j:], flattened.
  const lcs = new Uint32Array((n + 1) * (m + 1));
  const at = (i, j) => i * (m + 1) + j;
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      lcs[at(i, j)] = a[i] === b[j] ? lcs[at(i + 1, j + 1)] + 1 : Math.max(lcs[at(i + 1, j)], lcs[at(i, j + 1)]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push(["equal", a[i]]);
      i += 1;
      j += 1;
    } else if (i < n && (j >= m || lcs[at(i + 1, j)] >= lcs[at(i, j + 1)])) {
      out.push(["delete", a[i]]);
      i += 1;
    } else {
      out.push(["insert", b[j]]);
      j += 1;
    }
  }
  return out;
}

/** The new text's words, each with `changed`: true for the words the revision brought. */
export function markChanges(oldText, newText) {
  const out = [];
  for (const run of diffWords(oldText, newText)) {
    if (run.op === "delete") continue;
    for (const word of run.words) out.push({ word, changed: run.op === "insert" });
  }
  return out;
}

/**
 * A short sentence for a screen reader on what a revision changed, e.g. "alpha to alfa",
 * "added quick", "removed the"; null when nothing changed. More than `maxEdits` separate
 * edits, or more than `maxWords` words in them, read as the whole new line instead.
 */
export function describeChanges(oldText, newText, maxEdits = 3, maxWords = 12) {
  const edits = [];
  let pending = null; // a delete run waiting to see whether an insert follows it
  for (const run of diffWords(oldText, newText)) {
    if (run.op === "delete") {
      pending = run.words;
    } else if (run.op === "insert") {
      edits.push(pending ? { from: pending, to: run.words } : { from: [], to: run.words });
      pending = null;
    } else {
      if (pending) edits.push({ from: pending, to: [] });
      pending = null;
    }
  }
  if (pending) edits.push({ from: pending, to: [] });
  if (!edits.length) return null;
  const count = edits.reduce((n, e) => n + e.from.length + e.to.length, 0);
  if (edits.length > maxEdits || count > maxWords) {
    const now = words(newText).join(" ");
    return now ? `now reads: ${now}` : "removed the line's words";
  }
  return edits
    .map(({ from, to }) => {
      if (!from.length) return `added ${to.join(" ")}`;
      if (!to.length) return `removed ${from.join(" ")}`;
      return `${from.join(" ")} to ${to.join(" ")}`;
    })
    .join("; ");
}
