"""Events a stream produces, shared by the session, the engine, the server and `simulate`.

Positions are integer sample counts at 16 kHz on the stream's audio clock (the samples fed so
far); the protocol codec turns them into seconds. Word times in a Final are absolute stream
seconds already (they come from the model that way, shifted by the utterance start).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kettle.transcribe.types import SAMPLE_RATE, Word


@dataclass(frozen=True)
class Partial:
    utterance: int
    start: int
    end: int
    text: str
    stable: str
    # The text of the speculative final decoded at a pause (speculation.py): what the Final
    # will say if the endpoint confirms the pause. Not part of equality: it says how, not what.
    speculative: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Final:
    utterance: int
    start: int
    end: int
    text: str
    words: tuple[Word, ...]
    language: str
    # Why the utterance ended: "endpoint" (the VAD heard the pause), "max_length",
    # "finalize" or "stop"; None where unknown. Not part of equality: it says how, not what.
    reason: str | None = field(default=None, compare=False)
    # With SessionConfig.diarize: who spoke (0, 1, ... in the order first heard), and how
    # sure the label is (0..1); None otherwise. Every word of the final has this speaker.
    speaker: int | None = None
    speaker_confidence: float | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Revision:
    """A later, corrected text of final ``utterance`` (refine.py): decoded again with the
    audio that followed it. It replaces the final's text and words; the final itself stays
    what it was when sent. ``replaced`` is the text it replaces (for measurement)."""

    utterance: int
    start: int
    end: int
    text: str
    words: tuple[Word, ...]
    language: str
    replaced: str = field(default="", compare=False)
    refinement: int = field(default=1, compare=False)  # which pass read it: 1, 2, ...
    # With diarize: the speaker of its final (the audio is the same utterance's).
    speaker: int | None = None
    speaker_confidence: float | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Error:
    """code is one of docs/protocol.md#error's: bad_message, bad_audio, overloaded, internal."""

    code: str
    message: str
    fatal: bool = False


@dataclass(frozen=True)
class Done:
    """The last event of a stream. audio_samples counts the 16 kHz samples fed."""

    audio_samples: int
    utterances: int
    reason: str | None = None


@dataclass(frozen=True)
class SpeechStarted:
    """The VAD opened an utterance at ``start`` (with ``SessionConfig.vad_events`` only).

    The utterance's Partials and Final carry the same ``start``; ``NoTranscript(start)``
    says that no Final will come for it. ``retunes``: how many ``Session.reconfigure`` calls
    came before the VAD opened it (the utterance is decoded with the settings the last one
    set).
    """

    start: int
    retunes: int = field(default=0, compare=False)


@dataclass(frozen=True)
class SpeechStopped:
    """The utterance that began at ``start`` ended at ``end`` (vad_events only); ``reason``
    is the segmenter's: "endpoint", "max_length", "finalize" or "stop"."""

    start: int
    end: int
    reason: str = ""


@dataclass(frozen=True)
class NoTranscript:
    """The utterance that began at ``start`` held no words: no Final follows (vad_events)."""

    start: int


@dataclass(frozen=True)
class Finalized:
    """``finalize()`` ran at stream ``position`` (vad_events only): every utterance whose
    SpeechStarted came before this event is closed (a Final or NoTranscript follows)."""

    position: int


@dataclass(frozen=True)
class Paused:
    """Silence began in the open utterance that began at ``start`` (``SessionConfig.
    pause_events`` only): its last voiced frame ended at ``speech_end``; if no speech comes
    back the utterance ends at ``end``."""

    start: int
    speech_end: int
    end: int


@dataclass(frozen=True)
class Resumed:
    """Speech came back at ``at`` in the utterance that began at ``start``, after a hush
    (SessionConfig.hush_ms of silence, maybe short of a Paused) or a pause (pause_events
    only): the speculative final asked for in that silence is void."""

    start: int
    at: int


VadEvent = SpeechStarted | SpeechStopped | NoTranscript | Finalized
PauseEvent = Paused | Resumed
Event = Partial | Final | Revision | Error | Done | VadEvent | PauseEvent


def samples_to_seconds(samples: int) -> float:
    """Seconds with millisecond resolution, as docs/protocol.md wants them."""
    return round(samples / SAMPLE_RATE, 3)
