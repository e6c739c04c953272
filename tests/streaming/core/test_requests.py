"""A plan's decode request (streaming/core/requests.py): a final's token cap."""

from __future__ import annotations

from kettle.streaming.core.requests import FINAL_MIN_TOKENS, final_token_cap
from kettle.streaming.core.session import SessionConfig
from kettle.transcribe.model.fake import scripted_audio
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind

from tests.streaming.core.conftest import drive, window_key

SR = SAMPLE_RATE


def test_a_final_may_write_what_its_audio_can_hold_and_no_loop_past_it() -> None:
    assert final_token_cap(0) == FINAL_MIN_TOKENS
    assert final_token_cap(SR // 5) == FINAL_MIN_TOKENS + 2  # a 0.2 s blip: 18, not 224
    assert final_token_cap(10 * SR) == FINAL_MIN_TOKENS + 100
    assert final_token_cap(30 * SR) is None  # Whisper's own limit (224) is lower


def test_a_sessions_final_is_capped_by_its_own_audio_not_its_context() -> None:
    audio = scripted_audio([("silence", 0.5), ("voice", 2.0), ("silence", 1.0)] * 2)
    run = drive(audio, SessionConfig())
    finals = [r for r in run.requests if r.kind is DecodeKind.FINAL]
    assert len(run.finals) == 2 and finals[-1].context  # the second decoded in context
    for r in finals:
        _, ordinal, _, end, *_ = window_key(r)
        assert r.max_new_tokens == final_token_cap(end - run.finals[ordinal].start)
    whole = final_token_cap(len(finals[-1].audio))  # what its window, context and all, would get
    assert whole is not None and finals[-1].max_new_tokens is not None
    assert finals[-1].max_new_tokens < whole
    assert all(r.max_new_tokens is not None for r in run.requests)  # partials have theirs
