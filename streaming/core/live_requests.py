"""A session's own live decodes (partials and finals; refinements have ``refine_lane``): the
ids it gives its requests, the request for a plan, the plan each was asked for, and the one in
flight (pure).

At most one live request of a session is in flight: the planner asks for the next only when
this one came back, was dropped or failed.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from kettle.streaming.core.audio_buffer import AudioBuffer
from kettle.streaming.core.config import SessionConfig
from kettle.streaming.core.planner import Plan, StreamState
from kettle.streaming.core.requests import build_request, window_audio
from kettle.streaming.core.utterances import Utterance, UtteranceTracker
from kettle.transcribe.types import DecodeKind, DecodeRequest


@dataclass(frozen=True)
class Pending:
    """A live request sent and not yet back: the plan it decodes."""

    plan: Plan

    @property
    def utterance(self) -> Utterance:
        return self.plan.utterance

    @property
    def kind(self) -> DecodeKind:
        return self.plan.kind


class LiveRequests:
    def __init__(self, session_id: str) -> None:
        self._session_id = session_id
        self._seq = 0
        self._pending: dict[str, Pending] = {}
        self.in_flight: str | None = None

    def new_id(self, prefix: str = "") -> str:
        """The next request id of the session (refinements share the count, with "r")."""
        self._seq += 1
        return f"{self._session_id}/{prefix}{self._seq}"

    def ask(
        self,
        plan: Plan,
        state: StreamState,
        buf: AudioBuffer,
        config: SessionConfig,
        keyterms: tuple[str, ...],
    ) -> DecodeRequest:
        """The request for ``plan`` (planned on ``state``), now in flight."""
        rid = self.new_id()
        utt = plan.utterance
        audio = window_audio(buf, plan, state.speech_end)
        request = build_request(plan, config, self._session_id, rid, audio, keyterms)
        if plan.speculative:
            assert utt.end is None and state.hush_end is not None and state.speech_end is not None
            utt.speculation.request(plan.end, state.hush_end, state.speech_end)
        elif plan.kind is DecodeKind.PARTIAL:
            utt.last_partial_end = plan.end
        self._pending[rid] = Pending(plan)
        self.in_flight = rid
        return request

    def take(self, request_id: Hashable) -> Pending | None:
        """The request ``request_id`` is back (or will not run); None if not one of ours."""
        if not isinstance(request_id, str) or request_id not in self._pending:
            return None
        if self.in_flight == request_id:
            self.in_flight = None
        return self._pending.pop(request_id)

    def superseded(self, utts: UtteranceTracker) -> str | None:
        """The id of the request in flight if it is no longer the most useful one: a partial
        while a final is due, or a speculative final that speech resuming made void."""
        rid = self.in_flight
        if rid is None:
            return None
        plan = self._pending[rid].plan
        if plan.kind is DecodeKind.PARTIAL:
            return rid if utts.closed else None
        utt = plan.utterance
        if plan.speculative and (
            not utt.speculation.is_for(plan.end)
            or (utt.end is not None and not utt.speculation.matches(utt.end, utt.speech_end))
        ):
            return rid
        return None
