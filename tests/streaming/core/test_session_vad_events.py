"""The session's opt-in VAD events (SpeechStarted, SpeechStopped, NoTranscript, Finalized)
and its initial prompt: what protocols that report the VAD or group by commits rely on."""

from __future__ import annotations

from kettle.streaming.core.events import (
    Done,
    Event,
    Final,
    Finalized,
    NoTranscript,
    Partial,
    SpeechStarted,
    SpeechStopped,
)
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.core.vad import EnergyClassifier
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.types import DecodeRequest

TWO = scripted_audio([("silence", 1.0), ("voice", 2.0), ("silence", 1.0), ("voice", 1.5)])


def run(
    config: SessionConfig, decoder: FakeDecoder, *, finalize_at: int | None = None
) -> tuple[list[Event], list[DecodeRequest]]:
    session = Session(config, session_id="v", classifier=EnergyClassifier())
    events: list[Event] = []
    requests: list[DecodeRequest] = []

    def settle() -> None:
        while True:
            batch = session.poll_requests()
            events.extend(session.poll_events())
            if not batch:
                return
            requests.extend(batch)
            for result in decoder.decode_batch(batch):
                session.on_result(result)

    for pos in range(0, len(TWO), 320):
        if pos == finalize_at:
            session.finalize()
        session.feed_audio(TWO[pos : pos + 320])
        settle()
    session.stop()
    settle()
    return events, requests


def test_off_by_default() -> None:
    events, _ = run(SessionConfig(), FakeDecoder())
    assert all(isinstance(e, Partial | Final | Done) for e in events)


def test_each_utterance_starts_stops_and_resolves_in_order() -> None:
    events, _ = run(SessionConfig(vad_events=True), FakeDecoder())
    starts = [e for e in events if isinstance(e, SpeechStarted)]
    stops = [e for e in events if isinstance(e, SpeechStopped)]
    finals = [e for e in events if isinstance(e, Final)]
    assert len(starts) == len(stops) == len(finals) == 2
    for started, stopped, final in zip(starts, stops, finals, strict=True):
        assert started.start == stopped.start == final.start and stopped.end == final.end
        # Started, then its partials, then stopped, then its final.
        assert events.index(started) < events.index(stopped) < events.index(final)
        for p in (e for e in events if isinstance(e, Partial) and e.start == started.start):
            assert events.index(started) < events.index(p) < events.index(final)


def test_no_transcript_for_an_utterance_without_words() -> None:
    events, _ = run(SessionConfig(vad_events=True), FakeDecoder(text_for=lambda r: ""))
    starts = [e.start for e in events if isinstance(e, SpeechStarted)]
    assert [e.start for e in events if isinstance(e, NoTranscript)] == starts
    assert not [e for e in events if isinstance(e, Final)]


def test_finalize_closes_the_open_utterance_before_its_marker() -> None:
    at = 2 * 16000  # one second into the first voice
    events, _ = run(SessionConfig(vad_events=True), FakeDecoder(), finalize_at=at)
    marker = next(e for e in events if isinstance(e, Finalized))
    assert marker.position == at
    before = events[: events.index(marker)]
    (started,) = [e for e in before if isinstance(e, SpeechStarted)]
    (stopped,) = [e for e in before if isinstance(e, SpeechStopped)]
    assert stopped.start == started.start and stopped.end <= at


def test_prompt_conditions_the_first_request() -> None:
    _, requests = run(SessionConfig(prompt="  Kettle and Whisper "), FakeDecoder())
    assert requests[0].prompt == "Kettle and Whisper"
