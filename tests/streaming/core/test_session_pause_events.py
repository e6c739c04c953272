"""The session's opt-in pause events (Paused, Resumed) and the speculative mark on the Partial
that shows a pause's speculative final: what a protocol deciding turn ends itself (Deepgram
Flux) reads."""

from __future__ import annotations

import numpy as np
from kettle.streaming.core.events import Event, Final, Partial, Paused, Resumed
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.core.vad import EnergyClassifier
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio

SR = 16000
# A pause shorter than the endpoint (speech resumes), then one the endpoint confirms.
AUDIO = scripted_audio(
    [("silence", 0.5), ("voice", 1.5), ("silence", 0.35), ("voice", 1.0), ("silence", 1.0)]
)


def run(config: SessionConfig, audio: np.ndarray = AUDIO) -> list[Event]:
    session = Session(config, session_id="p", classifier=EnergyClassifier())
    decoder = FakeDecoder()
    events: list[Event] = []

    def settle() -> None:
        while batch := session.poll_requests():
            for result in decoder.decode_batch(batch):
                session.on_result(result)
        events.extend(session.poll_events())

    for pos in range(0, len(audio), 320):
        session.feed_audio(audio[pos : pos + 320])
        settle()
    session.stop()
    settle()
    return events


def test_off_by_default_and_partials_unmarked_equal() -> None:
    events = run(SessionConfig())
    assert not [e for e in events if isinstance(e, Paused | Resumed)]
    marked = Partial(0, 0, 1, "a", "", speculative=True)
    assert marked == Partial(0, 0, 1, "a", "")  # the mark says how, not what


def test_a_pause_that_resumes_then_one_that_ends() -> None:
    events = run(SessionConfig(pause_events=True, endpoint_silence_ms=500))
    paused = [e for e in events if isinstance(e, Paused)]
    resumed = [e for e in events if isinstance(e, Resumed)]
    finals = [e for e in events if isinstance(e, Final)]
    assert len(paused) == 2 and len(resumed) == 1 and len(finals) == 1
    first, second = paused
    assert first.start == second.start == resumed[0].start == finals[0].start
    # The speech ended where the voice did (to a 20 ms frame), the pause 200 ms later.
    assert abs(first.speech_end - 2.0 * SR) <= 320 and first.end - first.speech_end == 3200
    assert first.end < resumed[0].at < second.speech_end
    assert events.index(first) < events.index(resumed[0]) < events.index(second)
    assert events.index(second) < events.index(finals[0])


def test_the_speculative_final_is_shown_as_a_marked_partial() -> None:
    events = run(SessionConfig(pause_events=True, endpoint_silence_ms=500))
    marked = [e for e in events if isinstance(e, Partial) and e.speculative]
    assert marked  # at least the pause the endpoint confirmed
    final = next(e for e in events if isinstance(e, Final))
    last = marked[-1]
    assert events.index(last) < events.index(final) and last.text == final.text
    # The speculation is asked at the hush (60 ms), before the pause (200 ms) is announced:
    # the confirmed one's Paused comes after it, still before the final.
    paused = [e for e in events if isinstance(e, Paused)]
    assert paused and events.index(last) < events.index(paused[-1]) < events.index(final)
