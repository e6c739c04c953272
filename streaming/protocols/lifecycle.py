"""A codec's life on one connection, as phases and the one table of moves between them (as
``streaming/core/lifecycle.py`` has a session's and ``server/connection.py`` a connection's).

- ``AWAITING_AUDIO``: no audio was fed yet, so no engine stream is open: settings still go
  to its setup (kettle v1 takes ``config`` only now; an OpenAI ``session.update`` changes the
  setup instead of reconfiguring a stream), and a Finalize has nothing to end.
- ``STREAMING``: audio was fed (a ``FeedAudio`` went out): the stream is open.
- ``STOPPED``: the client ended the stream (CloseStream, Terminate, an empty frame), or an
  error ended the session: nothing more the client sends is read; engine events still come.

Only the codecs whose protocol ends a stream itself stop (Deepgram live and Flux,
AssemblyAI); kettle v1's ``stop`` and OpenAI Realtime's end are the runner's (its
``ConnectionState``), so those two never reach ``STOPPED``. A move the table does not list is
a bug in the codec and raises, changing nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping


class CodecPhase(enum.Enum):
    AWAITING_AUDIO = "awaiting_audio"
    STREAMING = "streaming"
    STOPPED = "stopped"


class Move(enum.Enum):
    AUDIO = "audio"  # audio went to the stream (FeedAudio)
    STOP = "stop"  # the client ended the stream, or an error ended the session


_A, _S, _X = CodecPhase.AWAITING_AUDIO, CodecPhase.STREAMING, CodecPhase.STOPPED

TRANSITIONS: Mapping[tuple[CodecPhase, Move], CodecPhase] = {
    (_A, Move.AUDIO): _S,
    (_S, Move.AUDIO): _S,  # every audio message after the first
    (_A, Move.STOP): _X,
    (_S, Move.STOP): _X,
    # An engine's fatal error after the client's own stop ends the session all the same
    # (AssemblyAI): stopping twice is allowed, and changes nothing.
    (_X, Move.STOP): _X,
}


class IllegalTransition(RuntimeError):
    """A move that `TRANSITIONS` does not allow from the current phase (a bug in the codec)."""

    def __init__(self, phase: CodecPhase, move: Move) -> None:
        super().__init__(f"a codec cannot take {move.value} when {phase.value}")
        self.phase, self.move = phase, move


class CodecLifecycle:
    """The phase of one codec; ``move`` is the only way to change it."""

    def __init__(self) -> None:
        self.phase = CodecPhase.AWAITING_AUDIO

    def move(self, move: Move) -> CodecPhase:
        new = TRANSITIONS.get((self.phase, move))
        if new is None:
            raise IllegalTransition(self.phase, move)
        self.phase = new
        return new

    @property
    def awaiting_audio(self) -> bool:
        return self.phase is CodecPhase.AWAITING_AUDIO

    @property
    def streaming(self) -> bool:
        return self.phase is CodecPhase.STREAMING

    @property
    def stopped(self) -> bool:
        return self.phase is CodecPhase.STOPPED


__all__ = ["TRANSITIONS", "CodecLifecycle", "CodecPhase", "IllegalTransition", "Move"]
