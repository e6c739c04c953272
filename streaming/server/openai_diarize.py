"""Speaker labels for an OpenAI upload (``response_format=diarized_json``): the transcript's
segments diarized on the engine's speaker thread, then named (openai_speakers.py).

Known speakers' references are decoded here (the upload's audio reader) and embedded on the
same thread, in the same call as the segments, so one request queues once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from kettle.streaming.engine.speakers import SpeakerService
from kettle.streaming.protocols.openai.errors import OpenAIError, bad_request
from kettle.streaming.protocols.openai.speakers import name_segments
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.errors import AudioError
from kettle.transcribe.speakers.diarize import MIN_EMBED_S, diarize_transcript
from kettle.transcribe.speakers.encoder import SpeakerEncoder
from kettle.transcribe.transcript import Transcript
from kettle.transcribe.types import SAMPLE_RATE

PARAM = "known_speaker_references"


def no_speaker_model() -> OpenAIError:
    return bad_request("This server has no speaker model, so it cannot diarize "
                       "(response_format diarized_json); start it with --diarize on.",
                       "response_format", "diarization_unavailable")  # fmt: skip


def load_references(known: Sequence[tuple[str, bytes]]) -> list[tuple[str, np.ndarray]]:
    """Each known speaker's reference audio (16 kHz mono); a 400 when one is not audio."""
    out = []
    for i, (name, data) in enumerate(known):
        try:
            audio = load_audio(data, name=f"{PARAM}[{i}]")
        except AudioError as exc:
            raise bad_request(f"{PARAM}[{i}] ({name!r}) could not be read as audio: {exc}.",
                              PARAM, "invalid_file") from None  # fmt: skip
        if len(audio) < MIN_EMBED_S * SAMPLE_RATE:
            raise bad_request(f"{PARAM}[{i}] ({name!r}) is too short to tell a voice by; "
                              "send 2 to 10 seconds of the speaker.", PARAM)  # fmt: skip
        out.append((name, audio))
    return out


async def diarize(
    speakers: SpeakerService | None,
    audio: np.ndarray,
    transcript: Transcript,
    references: Sequence[tuple[str, np.ndarray]] = (),
) -> tuple[Transcript, list[str]]:
    """The transcript with its segments' speakers set, and each segment's OpenAI label."""
    if speakers is None:
        raise no_speaker_model()

    def work(encoder: SpeakerEncoder) -> tuple[Transcript, list[str]]:
        labeled = diarize_transcript(encoder, audio, transcript)
        clusters = [s.speaker or 0 for s in labeled.segments]
        if not references:
            return labeled, name_segments(clusters, [None] * len(clusters))
        refs = [(name, encoder.embed(ref)) for name, ref in references]
        embeddings = [_embed(encoder, audio, s.start, s.end) for s in labeled.segments]
        return labeled, name_segments(clusters, embeddings, refs)

    return await speakers.run(work)


def _embed(
    encoder: SpeakerEncoder, audio: np.ndarray, start_s: float, end_s: float
) -> np.ndarray | None:
    start = max(0, round(start_s * SAMPLE_RATE))
    end = min(len(audio), round(end_s * SAMPLE_RATE))
    return encoder.embed(audio[start:end]) if end - start >= MIN_EMBED_S * SAMPLE_RATE else None
