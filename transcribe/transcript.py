"""The result of transcribing one recording: timed segments, and their JSON form.

Times here are seconds from the start of the recording (the pipeline has already stitched the
window-relative times of the decoder back onto the recording).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kettle.transcribe.types import Word

JSON_VERSION = 1


@dataclass(frozen=True)
class DecodeStats:
    """What the decoder said about the window a segment came from (faster-whisper's segment
    fields). Not part of the JSON form: a cached transcript comes back without them."""

    tokens: tuple[int, ...] = ()
    temperature: float = 0.0
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    no_speech_prob: float = 0.0


@dataclass(frozen=True)
class Segment:
    start: float
    end: float
    text: str
    words: tuple[Word, ...] = ()
    # Left out of equality: a transcript from the result cache equals the one decoded.
    stats: DecodeStats | None = field(default=None, compare=False)
    # With diarization (transcribe/speakers/diarize.py): who spoke, 0, 1, ... in order first heard.
    speaker: int | None = None
    speaker_confidence: float | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Transcript:
    duration_s: float
    language: str
    segments: tuple[Segment, ...]
    model: str = ""

    @property
    def text(self) -> str:
        return " ".join(s.text for s in self.segments if s.text)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": JSON_VERSION,
            "model": self.model,
            "language": self.language,
            "duration": round(self.duration_s, 3),
            "text": self.text,
            "segments": [
                {
                    "start": round(s.start, 3),
                    "end": round(s.end, 3),
                    "text": s.text,
                    **({} if s.speaker is None else {"speaker": s.speaker}),
                    **(
                        {
                            "words": [
                                {
                                    "word": w.word,
                                    "start": round(w.start, 3),
                                    "end": round(w.end, 3),
                                    "probability": round(w.probability, 4),
                                }
                                for w in s.words
                            ]
                        }
                        if s.words
                        else {}
                    ),
                }
                for s in self.segments
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Transcript:
        """Inverse of ``to_dict`` (times come back rounded to the millisecond)."""
        return cls(
            duration_s=float(data["duration"]),
            language=str(data.get("language", "")),
            model=str(data.get("model", "")),
            segments=tuple(
                Segment(
                    start=float(s["start"]),
                    end=float(s["end"]),
                    text=str(s["text"]),
                    words=tuple(
                        Word(
                            str(w["word"]),
                            float(w["start"]),
                            float(w["end"]),
                            float(w["probability"]),
                        )
                        for w in s.get("words", ())
                    ),
                    speaker=None if s.get("speaker") is None else int(s["speaker"]),
                )
                for s in data["segments"]
            ),
        )

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)

    @classmethod
    def from_json(cls, text: str) -> Transcript:
        return cls.from_dict(json.loads(text))
