"""What a client keeps to resume a stream on a new session, as the browser page does.

A stream may run over several server sessions (a replica restarts, a connection drops). Each
new session starts at the first sample no final covers yet: the audio after it is sent again,
so nothing is lost, and a final is never repeated. Each session counts its audio clock and its
utterances from zero, so the client shifts what the server sends onto the stream's own clock:
times continue across the reconnect and utterances stay numbered 0, 1, 2, ... without gaps.
A revision names its final by the session's number, so it is shifted the same way and can only
ever reach a final of its own session.

Pure bookkeeping, no I/O; `kettle.streaming.client.client` drives it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeGuard

# HTTP answers to a handshake worth trying again (elsewhere, or later); any other refusal
# (401, 403, 400, ...) would be the same on every replica.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Close codes after which the same audio would meet the same end: message too big, policy.
NO_RETRY_CLOSE_CODES = frozenset({1008, 1009})


def backoff_s(
    attempt: int,
    rand: Callable[[], float] = random.random,
    base_s: float = 0.5,
    max_s: float = 10.0,
) -> float:
    """Delay before reconnect ``attempt`` (0-based): 0.5 s doubling to 10 s, +-20 % jitter
    (the page's schedule), so replicas that restart together are not hit all at once."""
    plain = min(max_s, base_s * 2 ** max(0, attempt))
    return plain * (0.8 + 0.4 * rand())


def retry_after_s(header: str | None, cap_s: float = 30.0) -> float | None:
    """A ``Retry-After`` of whole seconds (what kettle sends), capped; None when absent/bad."""
    if header is None:
        return None
    try:
        seconds = int(header.strip())
    except ValueError:
        return None
    return float(min(seconds, cap_s)) if seconds >= 0 else None


@dataclass
class Timeline:
    """The stream's clock across sessions, in samples of ``rate`` Hz."""

    rate: int = 16000
    committed: int = 0  # samples the finals received so far cover
    offset: int = 0  # where the current session's audio clock starts
    base_utterance: int = 0  # finals of earlier sessions
    finals: int = 0  # finals received, all sessions

    def begin_session(self) -> int:
        """Start a session: returns the sample to (re)send from."""
        self.offset = self.committed
        self.base_utterance = self.finals
        return self.offset

    def revised_utterance(self, revision: dict[str, Any]) -> int | None:
        """The stream's number of the final a shifted revision replaces, or None when the
        current session sent no such final (a revision never reaches another session's)."""
        number = revision.get("utterance")
        if not _is_int(number):
            return None
        return number if self.base_utterance <= number < self.finals else None

    def shift(self, message: dict[str, Any]) -> dict[str, Any]:
        """The server's message on the stream's clock (a copy when anything moves).

        A final also moves ``committed`` to its end: audio before it is transcribed for good.
        A revision moves nothing: its final already covered that audio.
        """
        kind = message.get("type")
        if kind == "final":
            end = message.get("end")
            if isinstance(end, (int, float)):
                self.committed = max(self.committed, self.offset + round(end * self.rate))
            self.finals += 1
        if self.offset == 0 and self.base_utterance == 0:
            return message
        offset_s = self.offset / self.rate
        out = dict(message)
        if kind in ("partial", "final", "revision"):
            for key in ("start", "end"):
                if isinstance(out.get(key), (int, float)):
                    out[key] = round(out[key] + offset_s, 3)
            if _is_int(out.get("utterance")):
                out["utterance"] += self.base_utterance
            if isinstance(out.get("words"), list):
                out["words"] = [_shift_word(w, offset_s) for w in out["words"]]
        elif kind == "done":
            if isinstance(out.get("audio_seconds"), (int, float)):
                out["audio_seconds"] = round(out["audio_seconds"] + offset_s, 3)
            if isinstance(out.get("utterances"), int):
                out["utterances"] += self.base_utterance
        return out


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _shift_word(word: Any, offset_s: float) -> Any:
    if not isinstance(word, dict):
        return word
    out = dict(word)
    for key in ("start", "end"):
        if isinstance(out.get(key), (int, float)):
            out[key] = round(out[key] + offset_s, 3)
    return out
