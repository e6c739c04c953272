"""OpenAI's audio REST API, the response side: a transcript in, the body out (json, text,
srt, vtt, verbose_json, or SSE events).

- ``json`` carries ``usage`` (``{"type": "duration", "seconds": N}``, whole seconds rounded
  up, as OpenAI bills), ``languages`` (the transcript's language, ``[]`` when nothing was
  said) and, with ``include[]=logprobs``, ``logprobs`` (one entry per word: see
  openai_logprobs.py for why words stand in for tokens).
- ``stream=true`` sends one ``transcript.text.delta`` per segment, then one
  ``transcript.text.done``; the deltas concatenate to the done event's text, and their
  ``logprobs`` to the done event's. The done event's ``usage`` is the token shape the SDK
  types it with (openai_logprobs.token_usage).
- ``diarized_json`` is OpenAI's ``TranscriptionDiarized``: ``task``, ``duration``, ``text``,
  ``segments`` (``type`` "transcript.text.segment", ``id`` "seg_N", ``start``, ``end``,
  ``text``, ``speaker``: a known speaker's name or "A", "B", ...) and ``usage``; streamed, a
  ``transcript.text.segment`` event follows each segment's delta, before the done event.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from kettle.streaming.protocols.openai.logprobs import languages, token_usage, word_logprobs
from kettle.streaming.protocols.openai.rest import CONTENT_TYPES, AudioRequest, OpenAIError
from kettle.transcribe.files.writers import format_srt, format_vtt
from kettle.transcribe.transcript import Segment, Transcript

# Whisper's language names, as OpenAI's verbose_json reports them ("english").
_NAMES = (
    "af afrikaans|am amharic|ar arabic|as assamese|az azerbaijani|ba bashkir|be belarusian|"
    "bg bulgarian|bn bengali|bo tibetan|br breton|bs bosnian|ca catalan|cs czech|cy welsh|"
    "da danish|de german|el greek|en english|es spanish|et estonian|eu basque|fa persian|"
    "fi finnish|fo faroese|fr french|gl galician|gu gujarati|ha hausa|he hebrew|hi hindi|"
    "hr croatian|ht haitian creole|hu hungarian|hy armenian|id indonesian|is icelandic|"
    "it italian|ja japanese|jw javanese|ka georgian|kk kazakh|km khmer|kn kannada|ko korean|"
    "la latin|lb luxembourgish|ln lingala|lo lao|lt lithuanian|lv latvian|mg malagasy|"
    "mi maori|mk macedonian|ml malayalam|mn mongolian|mr marathi|ms malay|mt maltese|"
    "my myanmar|ne nepali|nl dutch|nn nynorsk|no norwegian|oc occitan|pa punjabi|pl polish|"
    "ps pashto|pt portuguese|ro romanian|ru russian|sa sanskrit|sd sindhi|si sinhala|"
    "sk slovak|sl slovenian|sn shona|so somali|sq albanian|sr serbian|su sundanese|"
    "sv swedish|sw swahili|ta tamil|te telugu|tg tajik|th thai|tk turkmen|tl tagalog|"
    "tr turkish|tt tatar|uk ukrainian|ur urdu|uz uzbek|vi vietnamese|yi yiddish|yo yoruba|"
    "zh chinese|yue cantonese|haw hawaiian"
)
LANGUAGE_NAMES = dict(pair.split(" ", 1) for pair in _NAMES.split("|"))


# -- responses --------------------------------------------------------------------------------


def usage(transcript: Transcript) -> dict[str, Any]:
    # OpenAI bills whole seconds of audio, rounded up.
    return {"type": "duration", "seconds": math.ceil(transcript.duration_s)}


def render(
    transcript: Transcript, request: AudioRequest, speakers: Sequence[str] = ()
) -> tuple[str, str]:
    """The body and content type of a non-streamed response (``speakers``: each segment's
    label, for diarized_json)."""
    fmt = request.response_format
    if fmt == "diarized_json":
        labeled = diarized(transcript, speakers)
        return json.dumps(labeled, ensure_ascii=False), CONTENT_TYPES[fmt]
    if fmt == "json":
        body: dict[str, Any] = {"text": transcript.text}
        if request.task == "transcribe":
            body["usage"] = usage(transcript)
            body["languages"] = _languages(transcript)
        if request.logprobs:
            body["logprobs"] = word_logprobs(w for s in transcript.segments for w in s.words)
        return json.dumps(body, ensure_ascii=False), CONTENT_TYPES[fmt]
    if fmt == "verbose_json":
        return json.dumps(verbose(transcript, request), ensure_ascii=False), CONTENT_TYPES[fmt]
    if fmt == "text":
        return transcript.text + "\n", CONTENT_TYPES[fmt]
    if fmt == "srt":
        return format_srt(transcript), CONTENT_TYPES[fmt]
    return format_vtt(transcript), CONTENT_TYPES[fmt]


def verbose(transcript: Transcript, request: AudioRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "task": request.task,
        "language": LANGUAGE_NAMES.get(transcript.language, transcript.language),
        "duration": round(transcript.duration_s, 3),
        "text": transcript.text,
        "segments": [_segment(i, s, request.words) for i, s in enumerate(transcript.segments)],
    }
    if request.words:
        body["words"] = [
            {"word": w.word.strip(), "start": round(w.start, 3), "end": round(w.end, 3)}
            for s in transcript.segments
            for w in s.words
        ]
    if request.task == "transcribe":
        body["usage"] = usage(transcript)
    return body


def _segment(index: int, seg: Segment, words: bool) -> dict[str, Any]:
    """faster-whisper's Segment fields (seek in 10 ms frames, as Whisper counts it)."""
    stats = seg.stats
    out: dict[str, Any] = {
        "id": index,
        "seek": round(seg.start * 100),
        "start": round(seg.start, 3),
        "end": round(seg.end, 3),
        "text": seg.text,
        "tokens": list(stats.tokens) if stats else [],
        "temperature": stats.temperature if stats else 0.0,
        "avg_logprob": round(stats.avg_logprob, 6) if stats else 0.0,
        "compression_ratio": round(stats.compression_ratio, 6) if stats else 0.0,
        "no_speech_prob": round(stats.no_speech_prob, 6) if stats else 0.0,
    }
    if words:
        out["words"] = [
            {
                "word": w.word,
                "start": round(w.start, 3),
                "end": round(w.end, 3),
                "probability": round(w.probability, 4),
            }
            for w in seg.words
        ]
    return out


def diarized(transcript: Transcript, speakers: Sequence[str]) -> dict[str, Any]:
    """OpenAI's ``TranscriptionDiarized``."""
    return {
        "task": "transcribe",
        "duration": round(transcript.duration_s, 3),
        "text": transcript.text,
        "segments": diarized_segments(transcript, speakers),
        "usage": usage(transcript),
    }


def diarized_segments(transcript: Transcript, speakers: Sequence[str]) -> list[dict[str, Any]]:
    """``TranscriptionDiarizedSegment``s (the said ones), ids ``seg_0``, ``seg_1``, ..."""
    said = [(s, n) for s, n in zip(transcript.segments, speakers, strict=True) if s.text]
    return [
        {
            "type": "transcript.text.segment",
            "id": f"seg_{i}",
            "start": round(seg.start, 3),
            "end": round(seg.end, 3),
            "text": seg.text,
            "speaker": speaker,
        }
        for i, (seg, speaker) in enumerate(said)
    ]


def sse(event: dict[str, Any]) -> str:
    return f"data: {json.dumps(event, ensure_ascii=False)}\n\n"


def stream_events(
    transcript: Transcript, request: AudioRequest | None = None, speakers: Sequence[str] = ()
) -> Iterable[str]:
    """SSE frames: a delta per segment (joined by spaces), then the done event; diarized, each
    delta names its segment (``segment_id``) and is followed by that segment's
    ``transcript.text.segment`` event."""
    logprobs = request is not None and request.logprobs
    segments = [s for s in transcript.segments if s.text]
    labeled = diarized_segments(transcript, speakers) if request and request.diarize else []
    for i, seg in enumerate(segments):
        delta: dict[str, Any] = {
            "type": "transcript.text.delta",
            "delta": seg.text if i == 0 else " " + seg.text,
        }
        if logprobs:
            delta["logprobs"] = word_logprobs(seg.words)
        if labeled:
            delta["segment_id"] = labeled[i]["id"]
        yield sse(delta)
        if labeled:
            yield sse(labeled[i])
    done: dict[str, Any] = {
        "type": "transcript.text.done",
        "text": " ".join(s.text for s in segments),
        "languages": _languages(transcript),
        "usage": token_usage(transcript.duration_s, [_tokens(s) for s in transcript.segments]),
    }
    if logprobs:
        done["logprobs"] = word_logprobs(w for s in segments for w in s.words)
    yield sse(done)


def _languages(transcript: Transcript) -> list[dict[str, str]]:
    return languages([transcript.language] if transcript.text else [])


def _tokens(seg: Segment) -> int:
    """The segment's decoded text tokens (its words when the stats are gone, from a cache)."""
    if seg.stats is not None and seg.stats.tokens:
        return len(seg.stats.tokens)
    return len(seg.words) or len(seg.text.split())


def stream_error(error: OpenAIError) -> str:
    """An error after the stream began (the SDK raises it as an APIError)."""
    return sse(error.body())
