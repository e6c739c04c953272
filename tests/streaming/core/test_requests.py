"""A plan's decode request (streaming/core/requests.py): a final's token cap, the beams."""

from __future__ import annotations

import pytest
from kettle.streaming.core.requests import FINAL_MIN_TOKENS, final_token_cap
from kettle.streaming.core.session import SessionConfig
from kettle.transcribe.errors import ConfigError
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


def test_a_partial_decodes_greedily_once_its_utterance_has_enough_stable_words() -> None:
    audio = scripted_audio([("silence", 0.5), ("voice", 8.0), ("silence", 1.0)])
    config = SessionConfig(partial_greedy_from_words=3, partial_beam_size=3, final_beam_size=5)
    run = drive(audio, config)
    partials = [r for r in run.requests if r.kind is DecodeKind.PARTIAL]
    stable = [len((r.prefix or "").split()) for r in partials]
    assert [r.beam_size for r in partials] == [1 if n >= 3 else 3 for n in stable]
    assert min(stable) < 3 <= max(stable)  # both beams were asked
    finals = [r for r in run.requests if r.kind is DecodeKind.FINAL]
    assert finals and all(r.beam_size == 5 for r in finals)  # a final keeps its beam
    assert finals[0].prefix and len(finals[0].prefix.split()) >= 3


def test_partials_keep_their_beam_when_greedy_partials_are_off() -> None:
    audio = scripted_audio([("silence", 0.5), ("voice", 8.0), ("silence", 1.0)])
    run = drive(audio, SessionConfig(partial_greedy_from_words=None, partial_beam_size=3))
    partials = [r for r in run.requests if r.kind is DecodeKind.PARTIAL]
    assert max(len((r.prefix or "").split()) for r in partials) >= 8
    assert {r.beam_size for r in partials} == {3}


@pytest.mark.parametrize("words", [-1, 201])
def test_a_greedy_partial_threshold_out_of_range_is_refused(words: int) -> None:
    with pytest.raises(ConfigError, match="partial_greedy_from_words"):
        SessionConfig(partial_greedy_from_words=words)
