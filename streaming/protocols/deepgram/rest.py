"""Deepgram's prerecorded API (``POST /v1/listen``): query parsing and the response body.

A binary body (any container the file pipeline reads, or raw audio when ``encoding`` is given)
comes in; ``{"metadata": ..., "results": {"channels": [{"alternatives": [...]}]}}`` goes out.
``request_id`` lives in ``metadata`` only: the SDK reads a body with a top-level
``request_id`` as the callback acknowledgement (``ListenV1AcceptedResponse``) instead.
No I/O here: the route decodes the audio and runs the pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kettle.streaming.protocols.deepgram.fields import PRERECORDED_QUERY
from kettle.streaming.protocols.deepgram.wire import (
    ModelIdentity,
    checked_query,
    plain_transcript,
    query_diarize,
    query_encoding,
    query_flag,
    query_keyterms,
    query_language,
    query_lists,
    refuse_redact,
    word_fields,
)
from kettle.transcribe.audio.read import RawFormat
from kettle.transcribe.transcript import Transcript

# Deepgram's raw encodings -> the file reader's RawFormat names.
RAW_ENCODINGS = {"linear16": "s16le", "mulaw": "mulaw", "alaw": "alaw"}


@dataclass(frozen=True)
class PrerecordedParams:
    raw: RawFormat | None = None  # None: a container, detected from the bytes
    model: str | None = None
    language: str | None = "en"  # None: detect
    punctuate: bool = False
    smart_format: bool = False
    detect_language: bool = False
    multichannel: bool = False  # results per channel, each transcribed on its own
    keyterms: tuple[str, ...] = ()  # keyterm and keywords, keyterms.normalize's form
    diarize: bool = False  # every word carries its segment's speaker

    @property
    def formatted(self) -> bool:
        return self.punctuate or self.smart_format


def parse_prerecorded_query(
    query: str, *, multilingual: bool, model_name: str
) -> PrerecordedParams:
    """The request's query string; ListenParamError (HTTP 400) names what is wrong."""
    return prerecorded_params(query_lists(query), multilingual=multilingual, model_name=model_name)


def prerecorded_params(
    values: Mapping[str, Sequence[str]], *, multilingual: bool, model_name: str
) -> PrerecordedParams:
    """A decoded query (`query_lists`), checked against ``PRERECORDED_QUERY``: documented
    parameters kettle does not implement are checked, then ignored (``redact`` is refused);
    undocumented ones are never read. As on the live endpoint, one that is not a list must
    not be given twice with different values, and ``encoding`` and ``sample_rate`` follow
    the live rule (`query_encoding`): raw audio needs both."""
    fields = checked_query(values, PRERECORDED_QUERY)
    refuse_redact(fields)
    raw = None
    encoding, rate = query_encoding(fields)
    if encoding is not None:
        raw = RawFormat(RAW_ENCODINGS[encoding], rate, fields.get("channels", 1))
    detect = query_flag(fields, "detect_language")
    language = query_language(
        fields, multilingual=multilingual, model_name=model_name, detect=detect
    )
    return PrerecordedParams(
        raw=raw,
        model=fields.get("model"),
        language=language if multilingual else (language or "en"),
        punctuate=query_flag(fields, "punctuate"),
        smart_format=query_flag(fields, "smart_format"),
        detect_language=detect,
        multichannel=query_flag(fields, "multichannel"),
        keyterms=query_keyterms(fields),
        diarize=query_diarize(fields),
    )


def render_prerecorded(
    transcript: Transcript | Sequence[Transcript],
    params: PrerecordedParams,
    *,
    request_id: str,
    created: str,
    sha256: str,
    channels: int,
    model: ModelIdentity,
) -> dict[str, Any]:
    """The JSON body of a 200 answer (``ListenV1Response``): ``results.channels`` holds one
    entry per transcript (with multichannel, one per channel; else the one mixed down)."""
    transcripts = [transcript] if isinstance(transcript, Transcript) else list(transcript)
    return {
        "metadata": {
            "transaction_key": "deprecated",
            "request_id": request_id,
            "sha256": sha256,
            "created": created,
            "duration": round(max(t.duration_s for t in transcripts), 3),
            "channels": channels,
            "models": [model.uuid],
            "model_info": {model.uuid: model.info()},
        },
        "results": {"channels": [_channel(t, params) for t in transcripts]},
    }


def _channel(transcript: Transcript, params: PrerecordedParams) -> dict[str, Any]:
    """One channel's ``alternatives`` (and detected language). With diarize each word takes
    its segment's speaker (diarize.diarize_transcript labels segments)."""
    words = [
        word_fields(
            w.word,
            w.start,
            w.end,
            w.probability,
            segment.speaker if params.diarize else None,
            segment.speaker_confidence,
        )
        for segment in transcript.segments
        for w in segment.words
        if w.word.strip()
    ]
    words = [w for w in words if w["word"]]
    confidence = round(sum(w["confidence"] for w in words) / len(words), 4) if words else 0.0
    text = transcript.text.strip() if params.formatted else plain_transcript(transcript.text)
    channel: dict[str, Any] = {
        "alternatives": [{"transcript": text, "confidence": confidence, "words": words}]
    }
    if params.detect_language:
        channel["detected_language"] = transcript.language
    return channel


def error_body(message: str, *, code: str = "Bad Request") -> dict[str, str]:
    """Deepgram's error body (``err_code``, ``err_msg``), for 4xx and 5xx answers."""
    return {"err_code": code, "err_msg": message}


__all__ = [
    "PrerecordedParams",
    "error_body",
    "parse_prerecorded_query",
    "prerecorded_params",
    "render_prerecorded",
]
