"""bench_ttfs's turns: one speaker's speech of 1-20 s, each an eval clip or several clips of
one speaker joined with short pauses, so that a turn is one turn to a listener.

- Speakers come from the eval manifest's names and notes (`speaker_of`): LibriSpeech's speaker
  id, the one LibriVox and LJSpeech reader, the CMU ARCTIC speaker, the pocketsphinx card
  player; every other clip (FLEURS' varied speakers, VCTK, AMI, JFK, ...) is its own speaker.
- Joined turns take consecutive clips of one speaker (in manifest order, wrapping round), each
  cut to its speech (Silero VAD) give or take ``MARGIN_S``, the first keeping its lead and the
  last its tail, with ``GAP_S`` from one clip's last speech to the next one's first.
- A turn's length is its speech: first speech start to last speech end. ``choose`` takes the
  turns round-robin over the length buckets (and over speakers within a bucket), so long turns
  count as much as short ones, and cycles the set where fewer turns exist than asked for.

Loading reads the audio; `join`, `choose` and `bucket_of` are pure.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

SR = 16000
LEAD_S = 0.5  # silence before every turn, as a microphone hears before someone speaks
GAP_S = 0.3  # the pause between two joined clips' speech: short enough to stay one turn
MARGIN_S = 0.05  # kept either side of a clip's speech where it is cut for joining
MIN_TURN_S = 1.0
MAX_TURN_S = 20.0
BUCKETS: tuple[tuple[float, float], ...] = ((0.0, 3.0), (3.0, 6.0), (6.0, 10.0), (10.0, 20.0))


@dataclass(frozen=True)
class Clip:
    """One eval recording: 16 kHz mono float32, what it says, who says it, and its speech
    span (seconds, Silero VAD with no padding)."""

    name: str
    audio: np.ndarray
    reference: str
    speaker: str
    speech_start_s: float
    speech_end_s: float


@dataclass(frozen=True)
class Turn:
    """What one connection streams: ``audio`` (lead silence included), the reference, and
    the end of its speech on that audio's clock."""

    name: str
    audio: np.ndarray
    reference: str
    speech_start_s: float
    speech_end_s: float
    clips: tuple[str, ...]
    speaker: str

    @property
    def speech_s(self) -> float:
        return self.speech_end_s - self.speech_start_s


def speaker_of(file: str, category: str) -> str:
    """Who speaks in an eval file, from its name and category (see the module docstring)."""
    stem = Path(file).stem.split("__", 1)[-1]
    if category == "librispeech":
        return "librispeech-" + stem.split("-", 1)[0]  # LibriSpeech names start with the id
    if category in ("librivox", "ljspeech"):
        return category  # one reader each, by the manifest's notes
    if category == "arctic_accent":
        return stem.rsplit("_", 1)[0]  # cmu_arctic_us_aew_a0001 -> cmu_arctic_us_aew
    if stem.startswith("cards_"):
        return "pocketsphinx-cards"  # "1 male speaker" for every card clip
    return stem


def speech_span(audio: np.ndarray) -> tuple[float, float] | None:
    """First speech start and last speech end (seconds) by Silero VAD, no padding: the end
    is the last speech sample, as a client's VAD hears it, not a padded one."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    speech = get_speech_timestamps(audio, VadOptions(min_silence_duration_ms=300, speech_pad_ms=0))
    if not speech:
        return None
    return speech[0]["start"] / SR, speech[-1]["end"] / SR


def load_clips(path: Path) -> list[Clip]:
    """The eval set's clips that hold speech, in manifest order (headerless .raw left out)."""
    from kettle.transcribe.audio.read import load_audio

    clips = []
    with open(path / "manifest.tsv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["file"].endswith(".raw"):
                continue
            audio = load_audio(path / row["file"])
            span = speech_span(audio)
            if span is None:
                continue
            speaker = speaker_of(row["file"], row["category"])
            clips.append(Clip(Path(row["file"]).stem, audio, row["reference_text"], speaker, *span))
    return clips


def join(clips: Sequence[Clip], name: str | None = None) -> Turn:
    """``clips`` as one turn after LEAD_S of silence: cut to their speech (MARGIN_S either
    side) where they meet, GAP_S between one's speech and the next one's."""
    lead = np.zeros(int(LEAD_S * SR), np.float32)
    silence = np.zeros(round((GAP_S - 2 * MARGIN_S) * SR), np.float32)
    pieces: list[np.ndarray] = [lead]
    offset = LEAD_S
    speech_start = speech_end = 0.0
    for i, clip in enumerate(clips):
        begin = 0.0 if i == 0 else max(0.0, clip.speech_start_s - MARGIN_S)
        end = len(clip.audio) / SR if i == len(clips) - 1 else clip.speech_end_s + MARGIN_S
        if i:
            pieces.append(silence)
            offset += len(silence) / SR
        piece = clip.audio[round(begin * SR) : round(end * SR)]
        if i == 0:
            speech_start = offset + clip.speech_start_s
        speech_end = offset + clip.speech_end_s - begin
        pieces.append(piece)
        offset += len(piece) / SR
    return Turn(
        name or "+".join(c.name for c in clips),
        np.concatenate(pieces).astype(np.float32),
        " ".join(c.reference.strip() for c in clips),
        speech_start,
        speech_end,
        tuple(c.name for c in clips),
        clips[0].speaker,
    )


def candidates(clips: Sequence[Clip], max_s: float = MAX_TURN_S) -> list[Turn]:
    """Every clip alone, then per speaker every run of 2+ consecutive clips (wrapping round
    the speaker's clips), whose speech lasts MIN_TURN_S to ``max_s``."""
    turns = [join([c]) for c in clips]
    by_speaker: dict[str, list[Clip]] = {}
    for clip in clips:
        by_speaker.setdefault(clip.speaker, []).append(clip)
    for group in by_speaker.values():
        n = len(group)
        for size in range(2, n + 1):
            for first in range(n):
                turns.append(join([group[(first + k) % n] for k in range(size)]))
    return [t for t in turns if MIN_TURN_S <= t.speech_s <= max_s]


def bucket_of(seconds: float) -> str:
    """The length bucket's label, e.g. "3-6 s" (the last bucket takes anything longer)."""
    for low, high in BUCKETS:
        if seconds < high:
            return bucket_label(low, high)
    return bucket_label(*BUCKETS[-1])


def bucket_label(low: float, high: float) -> str:
    return f"<{high:g} s" if low == 0 else f"{low:g}-{high:g} s"


def bucket_labels() -> list[str]:
    return [bucket_label(low, high) for low, high in BUCKETS]


def choose(pool: Sequence[Turn], count: int) -> list[Turn]:
    """``count`` turns: round-robin over the buckets, and within a bucket over speakers (by
    first clip), in pool order; where the pool runs out it starts again, the repeats named
    ``NAME#2``, ``NAME#3``... Deterministic: the same pool gives the same turns."""
    buckets: dict[str, list[Turn]] = {label: [] for label in bucket_labels()}
    for turn in pool:
        buckets[bucket_of(turn.speech_s)].append(turn)
    order = list(_round_robin(_by_speaker(b) for b in buckets.values() if b))
    if not order:
        return []
    chosen = []
    for k in range(count):
        turn = order[k % len(order)]
        lap = k // len(order)
        chosen.append(turn if lap == 0 else replace(turn, name=f"{turn.name}#{lap + 1}"))
    return chosen


def _by_speaker(turns: list[Turn]) -> list[Turn]:
    groups: dict[str, list[Turn]] = {}
    for turn in turns:
        groups.setdefault(turn.speaker, []).append(turn)
    return list(_round_robin(groups.values()))


def _round_robin(groups: Iterable[list[Turn]]) -> Iterable[Turn]:
    lists = [list(g) for g in groups]
    for k in range(max((len(g) for g in lists), default=0)):
        for group in lists:
            if k < len(group):
                yield group[k]
