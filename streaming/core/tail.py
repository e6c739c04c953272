"""Tail windows: a long utterance's later decodes start near its last stable words (pure).

A decode's cost grows with the tokens its window holds, forced or not: CTranslate2 steps
through a forced prefix one token at a time at full beam width. Without this, every partial
of a 15 s utterance, and its final, decodes all 15 s, its stable words forced (0.3-0.45 s on
two cores, and a final asked for while such a partial runs waits for it).

With it, once the stable words carry times (partials of a long utterance ask for word
timestamps), a window starts at a stable word that leaves at least ``min_s`` of audio after
it, a little before that word (word times are approximate): the stable words from there on
are forced as the prefix, those before it are the previous-text prompt, and the result is
made whole again with them (``restore``) before anything reads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kettle.streaming.core.agreement import normalized, split_words
from kettle.transcribe.types import SAMPLE_RATE, DecodeResult, Word


@dataclass(frozen=True)
class TailConfig:
    min_s: float = 4.0  # audio a tail window keeps after its first word, at least
    margin_s: float = 0.2  # the window starts this long before that word's start
    keep_words: int = 2  # stable words forced at the window's start, at least
    min_saved_s: float = 2.0  # a cut that leaves out less than this is not worth it


@dataclass(frozen=True)
class Cut:
    """Where a tail window starts and the stable words before it (absolute seconds)."""

    start: int  # samples
    lead: tuple[Word, ...]


def choose_cut(
    timed: Sequence[Word], stable_count: int, utt_start: int, window_end: int, cfg: TailConfig
) -> Cut | None:
    """The cut for a window [.., ``window_end``) of an utterance starting at ``utt_start``
    whose first ``len(timed)`` stable words (of ``stable_count``) have times; None: decode the
    utterance whole."""
    last = min(len(timed) - 1, stable_count - cfg.keep_words)  # the cut word's index, at most
    end_s = window_end / SAMPLE_RATE
    for j in range(last, 0, -1):
        start_s = timed[j].start - cfg.margin_s
        if end_s - timed[j].start < cfg.min_s:
            continue
        start = max(utt_start, int(start_s * SAMPLE_RATE))
        if start - utt_start < cfg.min_saved_s * SAMPLE_RATE:
            return None
        return Cut(start, tuple(timed[:j]))
    return None


# A tail final fell short where Silero hears a word after its last one: SHORT_CHUNKS of its
# 32 ms chunks at SHORT_PROBABILITY or more, from SHORT_SLACK_S after that word's end (all of
# them if fewer were heard: a speculative final's audio ends 60 ms after the speech). Word
# times from cross-attention end early, and a word's decay or a breath reads 0.5-0.8 for a
# few chunks (bench_ttfs's turns, issue 40: the finals that had lost words read 0.9 for 0.3 s
# and more; complete ones at most 0.8 for 0.1 s past the slack).
SHORT_SLACK_S = 0.15
SHORT_PROBABILITY = 0.8
SHORT_CHUNKS = 6


def fell_short(
    result: DecodeResult,
    lead: Sequence[Word],
    window_start: int,
    heard_end: int,
    speech_in: Callable[[int, int], bool],
    partial: str = "",
) -> bool:
    """Whether a tail window's final stopped before its speech did: ``speech_in(a, b)``
    (Silero) hears speech after its last word, or the utterance's last ``partial`` read words
    after the final's last two. A tail window ends early on its last word more often than a
    whole one (it has its prompt but not its audio), and cross-attention may stretch the word
    before over the lost one, so that Silero hears nothing after it: such a final is decoded
    whole."""
    if not lead or result.error is not None:
        return False
    if outrun(result.text, partial):
        return True
    if not result.words:
        return False
    last_end = window_start + int((result.words[-1].end + SHORT_SLACK_S) * SAMPLE_RATE)
    return speech_in(last_end, heard_end)


def outrun(final: str, partial: str) -> bool:
    """Whether ``partial`` goes on after the last place it says ``final``'s last two words."""
    said, heard = normalized(split_words(final)), normalized(split_words(partial))
    last = said[-2:]
    if not last or not heard:
        return False
    for i in range(len(heard) - len(last), -1, -1):
        if heard[i : i + len(last)] == last:
            return i + len(last) < len(heard)
    return False


def wants_times(samples: int, cfg: TailConfig) -> bool:
    """Whether a partial of an utterance ``samples`` long so far asks for word timestamps:
    from a second before a cut can pay, so that its stable words are timed by then."""
    return samples >= (cfg.min_s + cfg.min_saved_s - 1.0) * SAMPLE_RATE


def lead_text(lead: Sequence[Word]) -> str:
    return " ".join(w.word.strip() for w in lead)


def restore(result: DecodeResult, lead: Sequence[Word], window_start: int) -> DecodeResult:
    """``result`` of a tail window as if its window had held the whole utterance: the lead's
    text first, and its words first, timed relative to the window's start (so before it)."""
    if not lead or result.error is not None:
        return result
    offset = window_start / SAMPLE_RATE
    shifted = tuple(
        Word(w.word, round(w.start - offset, 3), round(w.end - offset, 3), w.probability)
        for w in lead
    )
    text = f"{lead_text(lead)} {result.text.strip()}".strip()
    words = shifted + tuple(result.words) if result.words else ()
    return dataclasses.replace(result, text=text, words=words)


def learn(
    known: Sequence[Word], stable: Sequence[str], words: Sequence[Word], window_start: int
) -> list[Word]:
    """The stable words' times: ``known`` extended with those of a hypothesis' ``words``
    (window-relative, as ``restore`` leaves them) where they read as the stable words. One
    stable word may be several of the model's ("cold-hearted": " cold", " -hearted")."""
    if len(known) >= len(stable):
        return list(known)  # every stable word is timed already
    offset = window_start / SAMPLE_RATE
    got = normalized([w.word.strip() for w in words])
    timed: list[Word] = []
    k = 0
    for shown, want in zip(stable, normalized(list(stable)), strict=True):
        first, joined = k, ""
        while k < len(got) and len(joined) < len(want):
            joined += got[k]
            k += 1
        if joined != want or not want:
            break
        w0, w1 = words[first], words[k - 1]
        # The stable word's own form: the lead is the stable words' text.
        timed.append(Word(f" {shown}", w0.start + offset, w1.end + offset, w0.probability))
    return timed if len(timed) > len(known) else list(known)
