"""Events a stream produces, shared by the session, the engine, the server and `simulate`.

Positions are integer sample counts at 16 kHz on the stream's audio clock (the samples fed so
far); the protocol codec turns them into seconds. Word times in a Final are absolute stream
seconds already (they come from the model that way, shifted by the utterance start).
"""

from __future__ import annotations

from dataclasses import dataclass

from kettle.transcribe.types import SAMPLE_RATE, Word


@dataclass(frozen=True)
class Partial:
    utterance: int
    start: int
    end: int
    text: str
    stable: str


@dataclass(frozen=True)
class Final:
    utterance: int
    start: int
    end: int
    text: str
    words: tuple[Word, ...]
    language: str


@dataclass(frozen=True)
class Error:
    """code is one of PROTOCOL.md's: bad_message, bad_audio, overloaded, internal."""

    code: str
    message: str
    fatal: bool = False


@dataclass(frozen=True)
class Done:
    """The last event of a stream. audio_samples counts the 16 kHz samples fed."""

    audio_samples: int
    utterances: int
    reason: str | None = None


Event = Partial | Final | Error | Done


def samples_to_seconds(samples: int) -> float:
    """Seconds with millisecond resolution, as PROTOCOL.md wants them."""
    return round(samples / SAMPLE_RATE, 3)
