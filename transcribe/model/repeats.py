"""Repetition in decoded text the audio did not say: loops and doubled runs (pure).

Whisper, tiny.en most of all, falls into loops ("the first to be the first to be ...", or
"s s s s s s s s s s s" over a short clip) and, forced to start with words it already wrote,
writes a phrase again ("And so my fellow Americans. And so my fellow Americans"). A loop is
a phrase of up to ``MAX_LOOP_WORDS`` words repeated back to back ``MIN_LOOP_REPEATS`` times
or more over ``MIN_LOOP_SPAN`` words ("no no no" is speech), or one word said
``MIN_WORD_REPEATS`` times or more ("Knock. Knock. Knock. Knock. Knock." for "not"); a
doubled run is a phrase of ``MIN_RUN_WORDS`` words or more said twice back to back. Both
keep their first pass. A short clip's loop fits in a few bytes, so gzip's compression ratio
(Whisper's own repetition test) does not see it; these rules do, on every decode.
"""

from __future__ import annotations

from collections.abc import Sequence

from kettle.transcribe.words import normalize_word

MAX_LOOP_WORDS = 8  # longest repeated phrase looked for
MIN_LOOP_REPEATS = 3
MIN_LOOP_SPAN = 6  # words a loop covers before it counts ("no no no" is speech)
MIN_WORD_REPEATS = 4  # one word said this many times back to back is a loop ("Knock." x5)
MIN_RUN_WORDS = 3  # a phrase this long said twice back to back is a doubled run
# Longest doubled run looked for: a whole sentence of 17-40 words came back twice in a
# voice agent's call (issue 40) where the limit was 16.
MAX_RUN_WORDS = 48


def loop_cut(words: Sequence[str]) -> list[int]:
    """Indices of ``words`` to keep: each run of a phrase repeated back to back at least
    MIN_LOOP_REPEATS times (over MIN_LOOP_SPAN words or more) keeps its first pass."""
    norm = [normalize_word(w) for w in words]
    keep: list[int] = []
    i = 0
    while i < len(norm):
        skip = 0
        for n in range(1, MAX_LOOP_WORDS + 1):
            phrase = norm[i : i + n]
            if len(phrase) < n:
                break
            repeats = 1
            while norm[i + repeats * n : i + (repeats + 1) * n] == phrase:
                repeats += 1
            looped = repeats >= MIN_LOOP_REPEATS and repeats * n >= MIN_LOOP_SPAN
            if looped or (n == 1 and repeats >= MIN_WORD_REPEATS and phrase[0]):
                skip = (repeats - 1) * n
                keep.extend(range(i, i + n))
                i += n + skip
                break
        if not skip:
            keep.append(i)
            i += 1
    return keep


def run_cut(words: Sequence[str]) -> list[int]:
    """Indices of ``words`` to keep: a phrase of MIN_RUN_WORDS or more words followed at once
    by itself loses the second copy (the longest such phrase first, left to right)."""
    norm = [normalize_word(w) for w in words]
    keep: list[int] = []
    i = 0
    while i < len(norm):
        doubled = 0
        for n in range(min(MAX_RUN_WORDS, (len(norm) - i) // 2), MIN_RUN_WORDS - 1, -1):
            if norm[i + n] != norm[i]:
                continue  # (cheap test first: most lengths fail on their first word)
            phrase = norm[i : i + n]
            if all(phrase) and norm[i + n : i + 2 * n] == phrase:
                doubled = n
                break
        if doubled:
            keep.extend(range(i, i + doubled))
            i += 2 * doubled
        else:
            keep.append(i)
            i += 1
    return keep


def repeat_cut(words: Sequence[str]) -> list[int]:
    """Indices of ``words`` to keep once loops and doubled runs are cut."""
    looped = loop_cut(words)
    kept = [words[i] for i in looped]
    return [looped[i] for i in run_cut(kept)]


def repeats(words: Sequence[str]) -> bool:
    """Whether ``words`` hold a loop or a doubled run."""
    return len(repeat_cut(words)) < len(words)


def tail_echo(previous: Sequence[str], words: Sequence[str]) -> int:
    """How many leading ``words`` say again the phrase that ends ``previous`` (the text just
    before them, another final of the stream): the longest such phrase of at least
    MIN_RUN_WORDS words, ``previous`` whole at most, 0 for none."""
    tail = [normalize_word(w) for w in previous]
    norm = [normalize_word(w) for w in words]
    for n in range(min(len(norm), len(tail)), MIN_RUN_WORDS - 1, -1):
        if norm[:n] == tail[len(tail) - n :] and all(norm[:n]):
            return n
    return 0
