// The finals list on the page, and what a screen reader is told about it.
//
// A final adds a line; a revision replaces its line in place, its changed words marked for
// MARK_MS (style.css fades the mark; with reduced motion it just goes away).
//
// Announcements go through a separate, visually hidden live region rather than the list
// itself: a revision rewrites the words of a line that is already there, and a live list
// would read the rewritten line out again with no hint that it is a correction. So the list
// is quiet, and the announcer says each new final's text once and, for a revision, only what
// changed ("Correction at 0:01.2: alpha to alfa").

import { formatClock, showsSpeaker, speakerColour, speakerName } from "./transcript.js";
import { describeChanges, markChanges } from "./worddiff.js";

export const MARK_MS = 2000;
const ANNOUNCE_KEEP = 3; // hidden entries kept, so browsing the page finds few duplicates

export class TranscriptView {
  /** `list`: the <ol> of finals; `announcer`: an aria-live="polite" element. */
  constructor(list, announcer, markMs = MARK_MS) {
    this.list = list;
    this.announcer = announcer;
    this.markMs = markMs;
    this._lines = new Map(); // final id -> <li>
    this._unmark = new Map(); // final id -> timer that takes the marks off its line
  }

  /** A new final (`prev`: the final before it, or none): its line, announced. */
  add(f, prev = null) {
    const li = this._line(f, prev);
    this.list.append(li);
    if (f.text) this._announce(showsSpeaker(f, prev) ? `${speakerName(f.speaker)}: ${f.text}` : f.text);
  }

  /**
   * Show or hide `f`'s speaker label after its speaker (or the one before it) changed, e.g.
   * by a revision: the revised final and the final after it are relabelled.
   */
  relabel(f, prev = null) {
    const li = this._lines.get(f?.id);
    if (li) this._setSpeaker(li, f, prev);
  }

  /** A revised final (`before`: its text until now): the line is rewritten in place. */
  revise(f, before) {
    const li = this._lines.get(f.id);
    if (!li) return;
    this._setTime(li.querySelector("time"), f.start);
    const text = li.querySelector(".text");
    clearTimeout(this._unmark.get(f.id));
    text.replaceChildren();
    markChanges(before, f.text).forEach(({ word, changed }, i) => {
      if (i) text.append(" ");
      if (!changed) {
        text.append(word);
        return;
      }
      const span = document.createElement("span");
      span.className = "revised";
      span.textContent = word;
      text.append(span);
    });
    li.dataset.revised = String(f.revisions);
    // The marks go; the line keeps its text as one plain run.
    this._unmark.set(
      f.id,
      setTimeout(() => {
        this._unmark.delete(f.id);
        text.textContent = f.text;
      }, this.markMs),
    );
    const what = describeChanges(before, f.text);
    if (what) this._announce(`Correction at ${formatClock(f.start)}: ${what}.`);
  }

  /** Draw every final again (after Clear); nothing is announced, old announcements go. */
  renderAll(finals) {
    for (const timer of this._unmark.values()) clearTimeout(timer);
    this._unmark.clear();
    this._lines.clear();
    this.list.replaceChildren(...finals.map((f, i) => this._line(f, finals[i - 1] ?? null)));
    this.announcer.replaceChildren(); // no copy of cleared text stays behind
  }

  _line(f, prev) {
    const li = document.createElement("li");
    li.dataset.final = String(f.id);
    const time = document.createElement("time");
    this._setTime(time, f.start);
    const text = document.createElement("span");
    text.className = "text";
    text.textContent = f.text;
    li.append(time, " ", text);
    this._setSpeaker(li, f, prev);
    this._lines.set(f.id, li);
    return li;
  }

  // The label before the text names the speaker at a turn; every line keeps its colour.
  _setSpeaker(li, f, prev) {
    li.querySelector(".speaker")?.remove();
    if (!Number.isInteger(f.speaker)) {
      delete li.dataset.speaker;
      return;
    }
    li.dataset.speaker = String(speakerColour(f.speaker));
    li.classList.toggle("turn", showsSpeaker(f, prev));
    if (!showsSpeaker(f, prev)) return;
    const label = document.createElement("span");
    label.className = "speaker";
    label.textContent = speakerName(f.speaker);
    li.querySelector(".text").before(label, " ");
  }

  _setTime(time, start) {
    time.textContent = formatClock(start);
    time.dateTime = `PT${start.toFixed(2)}S`;
  }

  _announce(text) {
    const p = document.createElement("p");
    p.textContent = text;
    this.announcer.append(p);
    while (this.announcer.childElementCount > ANNOUNCE_KEEP) this.announcer.firstElementChild.remove();
  }
}
