"""A session's life, as states and the one table of moves between them (as h11's ``_state``).

- ``LISTENING``: audio, finalize and reconfigure are taken.
- ``FINISHING``: ``stop`` came; audio and control calls are ignored while the last finals and
  refinements are decoded.
- ``DONE``: nothing is left to decode and the ``Done`` event is out; nothing more comes.

A session only moves forward; any other move is a bug in its owner and raises.
"""

from __future__ import annotations

import enum


class SessionState(enum.Enum):
    LISTENING = "listening"
    FINISHING = "finishing"
    DONE = "done"


class Move(enum.Enum):
    STOP = "stop"  # the client (or the server) ended the stream
    DRAINED = "drained"  # after stop, no utterance or decode is left


TRANSITIONS: dict[tuple[SessionState, Move], SessionState] = {
    (SessionState.LISTENING, Move.STOP): SessionState.FINISHING,
    (SessionState.FINISHING, Move.DRAINED): SessionState.DONE,
}


class IllegalTransition(RuntimeError):
    """A move the table does not allow from the current state."""


class Lifecycle:
    """The state of one session; ``move`` is the only way to change it."""

    def __init__(self) -> None:
        self.state = SessionState.LISTENING

    def move(self, move: Move) -> SessionState:
        new = TRANSITIONS.get((self.state, move))
        if new is None:
            raise IllegalTransition(f"a session cannot {move.value} when {self.state.value}")
        self.state = new
        return new

    @property
    def listening(self) -> bool:
        return self.state is SessionState.LISTENING

    @property
    def done(self) -> bool:
        return self.state is SessionState.DONE
