"""The decode request for a plan: its window's audio and the request itself (pure)."""

from __future__ import annotations

import math

import numpy as np
from kettle.streaming.core.audio_buffer import AudioBuffer
from kettle.streaming.core.config import SessionConfig
from kettle.streaming.core.planner import Plan
from kettle.streaming.core.refine import RefinePlan
from kettle.streaming.core.speculation import fill_tail
from kettle.streaming.core.tail import wants_times
from kettle.transcribe.model import defaults, keyterms
from kettle.transcribe.model.prompts import MAX_LENGTH
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeRequest, Purpose

PARTIAL_MAX_TOKENS = defaults.PARTIAL_MAX_TOKENS
# A final's new tokens, by its own audio: fast speech writes 4-5 tokens a second. A longer
# hypothesis is a loop, and at beam width (or five samples in a fallback round) it ran to
# Whisper's 224 tokens: 2.7 s of model time on a 0.2 s noise utterance, which every stream's
# next final waited behind.
FINAL_TOKENS_PER_S = 10
FINAL_MIN_TOKENS = 16


def final_token_cap(samples: int) -> int | None:
    """The new tokens a final of ``samples`` of its own audio may generate (None: Whisper's
    limit is lower)."""
    cap = FINAL_MIN_TOKENS + math.ceil(FINAL_TOKENS_PER_S * samples / SAMPLE_RATE)
    return cap if cap < MAX_LENGTH // 2 else None


def window_audio(buf: AudioBuffer, plan: Plan, speech_end: int | None) -> np.ndarray:
    """The plan's window; a speculative final's tail not heard yet is filled from the
    pause heard so far (speculation.fill_tail)."""
    if plan.heard_end is None:
        return buf.slice(plan.start, plan.end)
    assert speech_end is not None  # a pause is open
    return fill_tail(
        buf.slice(plan.start, plan.heard_end),
        silence=plan.heard_end - speech_end,
        missing=plan.end - plan.heard_end,
    )


def build_refinement(
    plan: RefinePlan,
    config: SessionConfig,
    session_id: str,
    request_id: str,
    audio: np.ndarray,
    terms: tuple[str, ...] = (),
) -> DecodeRequest:
    """The request that refines ``plan``'s final: a final's beam, word timestamps, and one
    temperature round only (a hypothesis that fails it is no better than the final). The
    earlier finals are its prompt, not forced (refine.py); the final's own encoder length."""
    return DecodeRequest(
        audio=audio,
        kind=DecodeKind.FINAL,
        request_id=request_id,
        prompt=plan.prompt or None,
        hotwords=keyterms.hotwords(terms),
        # An English-only live model means English, whatever model refines (base knows more).
        language=config.language or (None if config.multilingual else "en"),
        languages=config.languages,
        word_timestamps=True,
        beam_size=config.final_beam_size,
        cache_key=(session_id, "refine", plan.target.number, plan.start, plan.end),
        max_new_tokens=plan.max_tokens,
        fallback_round=0,
        purpose=Purpose.REFINEMENT,
        encode_min_s=config.encode_min_s(DecodeKind.FINAL),
    )


def build_request(
    plan: Plan,
    config: SessionConfig,
    session_id: str,
    request_id: str,
    audio: np.ndarray,
    terms: tuple[str, ...] = (),
) -> DecodeRequest:
    """The request that decodes ``plan`` on ``audio``, with the config's beams and caps, the
    stream's current keyterms ``terms`` and the language its utterance opened with."""
    utt = plan.utterance
    settings = utt.settings
    final = plan.kind is DecodeKind.FINAL
    tail = config.tail_config()
    return DecodeRequest(
        audio=audio,
        kind=plan.kind,
        request_id=request_id,
        prompt=plan.context.prompt or None,
        prefix=plan.prefix or None,
        context=plan.context.text or None,
        hotwords=keyterms.hotwords(terms),
        language=settings.language,
        languages=settings.languages,
        # A tail window's final needs its words' times for the check that it fell short.
        word_timestamps=(
            final and (settings.word_timestamps or config.revisions or bool(plan.lead))
        )
        or (tail is not None and wants_times(plan.end - utt.start, tail)),
        beam_size=config.final_beam_size if final else config.partial_beam_size,
        max_new_tokens=final_token_cap(plan.end - utt.start) if final else PARTIAL_MAX_TOKENS,
        # Same window, same key: a decode over a window already encoded reuses it (a
        # window with a filled tail is not the heard one, so its key names the fill).
        cache_key=(session_id, utt.ordinal, plan.start, plan.end)
        + (() if plan.heard_end is None else ("filled from", plan.heard_end)),
        stream_key=(session_id, utt.ordinal),
        purpose=plan.purpose,
        encode_min_s=config.encode_min_s(plan.kind),
    )
