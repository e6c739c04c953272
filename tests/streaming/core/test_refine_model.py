"""The refinement pass with the real tiny.en model on a conversation of real voices: the
refined transcript reaches offline decoding's accuracy, and revisions keep their promises."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from kettle.streaming.core.events import Done, Final, Revision
from kettle.streaming.core.session import SessionConfig
from kettle.transcribe.types import SAMPLE_RATE

from tests.streaming.core.conftest import stream_events

pytestmark = pytest.mark.slow

SR = SAMPLE_RATE


def test_the_refined_transcript_is_within_a_point_of_offline_decoding(
    tiny_decoder: Any,
    conversation: tuple[np.ndarray, str],
    wer_fn: Callable[[list[str], list[str]], float],
) -> None:
    from kettle.transcribe.model import fw

    audio, reference = conversation
    events = stream_events(tiny_decoder, audio, SessionConfig(revisions=True))
    finals = {e.utterance: e for e in events if isinstance(e, Final)}
    revisions = [e for e in events if isinstance(e, Revision)]
    refined = dict((n, f.text) for n, f in finals.items())
    for r in revisions:
        assert r.utterance in finals and r.text != finals[r.utterance].text
        assert events.index(finals[r.utterance]) < events.index(r)
        assert r.words and r.words[0].start >= finals[r.utterance].start / SR
        refined[r.utterance] = r.text
    assert isinstance(events[-1], Done) and events[-1].utterances == len(finals)
    assert len({r.utterance for r in revisions}) == len(revisions)  # once each at most

    model = fw.load_whisper(str(tiny_decoder.path), device="cpu", compute_type="int8", threads=2)
    segments, _ = model.transcribe(audio, beam_size=5)
    offline = " ".join(s.text.strip() for s in segments)
    text = " ".join(refined[n] for n in sorted(refined))
    refined_wer, offline_wer = wer_fn([reference], [text]), wer_fn([reference], [offline])
    live_wer = wer_fn([reference], [" ".join(finals[n].text for n in sorted(finals))])
    assert refined_wer <= offline_wer + 0.01, (text, offline)
    # faster-whisper skips speech on joined clips (35 % here): revisions must not cost words
    # either. About 90 words: a bound of 2.5 points leaves room for one word that rounds
    # differently on another CPU (AVX2 or AVX-512), not for a revision that hurts.
    assert refined_wer <= live_wer + 0.025, text
