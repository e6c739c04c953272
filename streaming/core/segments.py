"""The segmenter's decisions applied to a session's utterances (pure): an utterance opens,
pauses, resumes and closes, with the VAD events a client asked for."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kettle.streaming.core.agreement import Agreement
from kettle.streaming.core.events import Event, Paused, Resumed, SpeechStarted, SpeechStopped
from kettle.streaming.core.speakers import Speakers
from kettle.streaming.core.tuning import Tuning
from kettle.streaming.core.utterances import UtteranceTracker
from kettle.streaming.core.vad import (
    FRAME_SAMPLES,
    Pause,
    Resume,
    Segmenter,
    SpeechEnd,
    SpeechStart,
)


class SegmentDecisions:
    def __init__(
        self,
        tuning: Tuning,
        segmenter: Segmenter,
        utts: UtteranceTracker,
        speakers: Speakers,
        emit: Callable[[Event], None],
    ) -> None:
        self._tuning = tuning
        # Fields no reconfigure changes: they are read once.
        config = tuning.config
        self._vad_events = config.vad_events
        self._pause_events = config.pause_events
        self._holdback = config.stable_holdback
        self._agree = config.stable_agree
        self._agree_first = config.stable_agree_first or config.stable_agree
        self._request: int | None = None  # the request (context_from) of the last opened
        self._segmenter = segmenter
        self._utts = utts
        self._speakers = speakers
        self._emit = emit

    def apply(self, decisions: Sequence[object]) -> None:
        for d in decisions:
            if isinstance(d, SpeechStart):
                self._open(d)
            elif isinstance(d, Pause):
                self._pause(d)
            elif isinstance(d, Resume):
                self._resume()
            elif isinstance(d, SpeechEnd):
                self._close(d, self._tuning.planner.final_tail)

    def _open(self, d: SpeechStart) -> None:
        # It is decoded with the settings of now (Tuning), until it closes.
        self._utts.next_start(d.start)
        # The first words of a request's first utterance may need fewer partials to agree.
        request = self._tuning.settings.context_from
        first = self._agree_first if request != self._request else None
        self._request = request
        agreement = Agreement(self._holdback, self._agree, first=first)
        self._utts.start(d.start, agreement, self._tuning.settings)
        if self._vad_events:
            self._emit(SpeechStarted(d.start, self._tuning.retunes))

    def _pause(self, d: Pause) -> None:
        # The planner reads the pause state from the segmenter.
        utt = self._utts.open
        if self._pause_events and utt is not None:
            # The pause is heard tail_frames after the last voiced frame.
            tail = self._segmenter.config.tail_frames * FRAME_SAMPLES
            self._emit(Paused(utt.start, max(utt.start, d.end - tail), d.end))

    def _resume(self) -> None:
        if self._utts.open is not None:
            self._utts.open.speculation.invalidate()  # speech is back
            # A tail final that fell short in the pause (tail.py) spoke for that pause only:
            # the utterance's later decodes may use tail windows again.
            self._utts.open.whole = False
            if self._pause_events:
                self._emit(Resumed(self._utts.open.start, self._segmenter.position))

    def _close(self, d: SpeechEnd, final_tail: int) -> None:
        # The final's window keeps the silence after the speech, up to ``final_tail``;
        # only audio known to be silence (a cut, or a finalize mid-speech, keeps none: what
        # follows belongs to the next utterance).
        tail_end = d.speech_end + final_tail
        limit = min(max(d.end, tail_end), d.silent_until)
        utt = self._utts.close(d.end, limit, self._segmenter.position)
        if utt is None:
            return
        utt.end_reason = d.reason
        utt.speech_end = d.speech_end
        self._speakers.closed(utt)
        utt.sealed = d.reason in ("endpoint", "max_length") or d.silent_until > d.end
        if not utt.speculation.matches(d.end, d.speech_end):
            utt.speculation.invalidate()
        if self._vad_events:
            self._emit(SpeechStopped(utt.start, d.end, d.reason))
