"""Fixtures and helpers shared by the session tests: a session driven by a fake model and no
clock (``drive``), one driven by any model in 20 ms chunks (``stream_events``), and a
conversation of real voices (``conversation``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from kettle.streaming.core.events import Event, Final, Partial
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.core.vad import EnergyClassifier
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.model.fake import FakeDecoder
from kettle.transcribe.types import SAMPLE_RATE, DecodeRequest

SR = SAMPLE_RATE
CATEGORIES = ("fleurs", "arctic_accent", "vctk_accent", "librivox", "librispeech", "ljspeech")

# The per-utterance path (each utterance decoded alone, 0.2 s of silence in a final's window,
# every agreed word stable): what the session did before finals in context. Most timing
# tests of test_session.py use it, since their exact windows are easy to read; the context
# tests use the defaults.
# The per-utterance path (what the session did before context): the tests' reference.
ALONE = SessionConfig(
    context_s=0,
    final_tail_ms=200,
    stable_holdback=0,
    stable_agree=2,
    partial_beam_size=1,
    final_beam_size=5,
    partial_encode_s=30.0,
)


@dataclass
class Run:
    events: list[Event] = field(default_factory=list)
    requests: list[DecodeRequest] = field(default_factory=list)
    log: list[object] = field(default_factory=list)  # requests and events interleaved

    @property
    def finals(self) -> list[Final]:
        return [e for e in self.events if isinstance(e, Final)]

    @property
    def partials(self) -> list[Partial]:
        return [e for e in self.events if isinstance(e, Partial)]


def window_key(r: DecodeRequest) -> tuple[Any, ...]:
    """A session request's cache key, which names its window: (session, utterance, start,
    end[, "filled from", sample]); DecodeRequest types it only as Hashable."""
    assert isinstance(r.cache_key, tuple)
    return r.cache_key


def drive(
    audio: np.ndarray,
    config: SessionConfig | None = None,
    *,
    decoder: FakeDecoder | None = None,
    chunks: Callable[[int], int] = lambda i: 320,
    lag: int = 0,
    stop: bool = True,
) -> Run:
    """Feed audio in chunks; answer requests after `lag` more chunks (0: at once)."""
    dec = decoder or FakeDecoder()
    session = Session(config or ALONE, session_id="t", classifier=EnergyClassifier())
    run = Run()
    waiting: list[tuple[int, DecodeRequest]] = []

    def settle(step: int, force: bool = False) -> None:
        while True:
            for r in session.poll_requests():
                run.requests.append(r)
                run.log.append(("request", r.kind.value, r.cache_key))
                waiting.append((step, r))
            new = session.poll_events()
            run.events += new
            run.log += new
            due = [w for w in waiting if force or step - w[0] >= lag]
            if not due:
                return
            for w in due:
                waiting.remove(w)
                (result,) = dec.decode_batch([w[1]])
                session.on_result(result)

    pos, i = 0, 0
    while pos < len(audio):
        n = chunks(i)
        session.feed_audio(audio[pos : pos + n])
        pos += n
        i += 1
        settle(i)
    if stop:
        session.stop()
        settle(i, force=True)
    return run


def stream_events(decoder: Any, audio: np.ndarray, config: SessionConfig) -> list[Event]:
    """Play audio into a session in 20 ms chunks, decoding each request at once (the decodes
    happen at the audio positions a real-time stream would have them at); every event."""
    return play(Session(config, session_id="m"), decoder, audio)


def play(
    session: Session,
    decoder: Any,
    audio: np.ndarray,
    seen: Callable[[DecodeRequest], None] | None = None,
) -> list[Event]:
    """``stream_events`` on a session of one's own; ``seen`` gets each request first."""
    events: list[Event] = []

    def settle() -> None:
        while requests := session.poll_requests():
            if seen is not None:
                for request in requests:
                    seen(request)
            for result in decoder.decode_batch(requests):
                session.on_result(result)
        events.extend(session.poll_events())

    for i in range(0, len(audio), 320):
        session.feed_audio(audio[i : i + 320])
        settle()
    session.stop()
    settle()
    return events


@pytest.fixture(scope="module")
def conversation(eval_clips: list[Any]) -> tuple[np.ndarray, str]:
    """One clip of each of several voices, joined with 0.7-1.5 s of silence."""
    chosen = []
    for category in CATEGORIES:
        chosen += [c for c in eval_clips if c.category == category and 2 <= c.duration_s <= 9][:1]
    gaps = [0.7, 1.5, 1.0, 1.2, 0.8, 1.4]
    parts = [np.zeros(SR // 2, np.float32)]
    for clip, gap in zip(chosen, gaps, strict=False):
        parts += [load_audio(clip.path), np.zeros(int(gap * SR), np.float32)]
    return np.concatenate(parts), " ".join(c.reference for c in chosen)
