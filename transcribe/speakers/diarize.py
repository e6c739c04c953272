"""Speaker labels for a whole file's segments (the CLI, and REST uploads through the engine).

Each span's audio is embedded (``SpeakerEncoder``) and the file is clustered at once
(``speakers.label_offline``: it may look ahead, unlike a live stream).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from kettle.transcribe.speakers.clusters import DEFAULT_MAX_SPEAKERS, SpeakerLabel, label_offline
from kettle.transcribe.speakers.encoder import SpeakerEncoder
from kettle.transcribe.transcript import Transcript
from kettle.transcribe.types import SAMPLE_RATE

MIN_EMBED_S = 0.3  # shorter spans carry no usable voice: they take the nearest label


def label_spans(
    encoder: SpeakerEncoder,
    audio: np.ndarray,
    spans: Sequence[tuple[float, float]],
    max_speakers: int = DEFAULT_MAX_SPEAKERS,
) -> list[SpeakerLabel]:
    """One label per (start_s, end_s) span of ``audio`` (16 kHz mono)."""
    embeddings: list[np.ndarray | None] = []
    seconds: list[float] = []
    for start_s, end_s in spans:
        start = max(0, round(start_s * SAMPLE_RATE))
        end = min(len(audio), round(end_s * SAMPLE_RATE))
        length = max(0, end - start) / SAMPLE_RATE
        seconds.append(length)
        embeddings.append(encoder.embed(audio[start:end]) if length >= MIN_EMBED_S else None)
    return label_offline(embeddings, seconds, max_speakers=max_speakers)


def diarize_transcript(
    encoder: SpeakerEncoder,
    audio: np.ndarray,
    transcript: Transcript,
    max_speakers: int = DEFAULT_MAX_SPEAKERS,
) -> Transcript:
    """The transcript with every segment's ``speaker`` set (``audio``: the recording, 16 kHz).

    A segment is one speaker: the pipeline cuts segments at pauses, where turns change."""
    spans = [(s.start, s.end) for s in transcript.segments]
    labels = label_spans(encoder, audio, spans, max_speakers)
    segments = tuple(
        dataclasses.replace(s, speaker=label.speaker, speaker_confidence=label.confidence)
        for s, label in zip(transcript.segments, labels, strict=True)
    )
    return dataclasses.replace(transcript, segments=segments)
