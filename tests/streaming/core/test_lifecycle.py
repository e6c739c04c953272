"""A session's lifecycle as a table: every allowed move goes where the table says, every other
move from every state raises and changes nothing, and a Session walks the table."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from kettle.streaming.core.events import Done
from kettle.streaming.core.lifecycle import (
    TRANSITIONS,
    IllegalTransition,
    Lifecycle,
    Move,
    SessionState,
)
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.core.vad import EnergyClassifier
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio

L, F, D = SessionState.LISTENING, SessionState.FINISHING, SessionState.DONE

# The whole table, written out: a change to the lifecycle shows here.
EXPECTED = {
    (L, Move.STOP): F,
    (F, Move.DRAINED): D,
}
ILLEGAL = [pair for pair in itertools.product(SessionState, Move) if pair not in EXPECTED]


def reach(state: SessionState) -> Lifecycle:
    """A lifecycle brought to ``state`` by allowed moves only."""
    life = Lifecycle()
    path = {L: [], F: [Move.STOP], D: [Move.STOP, Move.DRAINED]}[state]
    for move in path:
        life.move(move)
    assert life.state is state
    return life


def test_the_table_is_the_one_written_here() -> None:
    assert TRANSITIONS == EXPECTED


def test_a_lifecycle_starts_listening() -> None:
    life = Lifecycle()
    assert life.state is L and life.listening and not life.done


@pytest.mark.parametrize(("state", "move", "after"), [(s, m, a) for (s, m), a in EXPECTED.items()])
def test_an_allowed_move_goes_where_the_table_says(
    state: SessionState, move: Move, after: SessionState
) -> None:
    life = reach(state)
    assert life.move(move) is after
    assert life.state is after
    assert life.listening == (after is L) and life.done == (after is D)


@pytest.mark.parametrize(("state", "move"), ILLEGAL)
def test_any_other_move_is_refused_and_changes_nothing(state: SessionState, move: Move) -> None:
    life = reach(state)
    with pytest.raises(IllegalTransition):
        life.move(move)
    assert life.state is state


def test_a_session_walks_the_table() -> None:
    audio = scripted_audio([("silence", 1.0), ("voice", 2.0)])  # stopped mid-utterance
    session = Session(SessionConfig(), session_id="l", classifier=EnergyClassifier())
    decoder = FakeDecoder()
    session.feed_audio(audio)
    assert not session.stopping and not session.done
    session.stop("eof")
    assert session.stopping and not session.done  # the last final is still to decode
    session.stop("again")  # a second stop is ignored, not an illegal move
    session.finalize()
    session.feed_audio(np.zeros(320, dtype=np.float32))
    fed = session.samples_fed
    while requests := session.poll_requests():
        for request in requests:
            session.on_result(decoder.decode_batch([request])[0])
    assert session.stopping and session.done
    assert session.samples_fed == fed  # audio after stop is ignored
    events = session.poll_events()
    assert [e for e in events if isinstance(e, Done)] == [Done(fed, 1, "eof")]
    assert isinstance(events[-1], Done)
