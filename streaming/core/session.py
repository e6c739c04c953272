"""One stream's state machine: audio in, decode requests and events out.

Pure: no I/O, no threads, no wall clock; its clock is the number of samples received. The
engine (or a test) feeds it audio, control calls and decode results, then collects what it
produced with ``poll_requests()`` and ``poll_events()``.

The path of an utterance:

1. The VAD segmenter opens it (with pre-roll). While it is open, every ``partial_interval_s``
   of new audio (stretched under overload) a PARTIAL request covers the utterance so far,
   with a beam of ``partial_beam_size``, forced to start with the stable words. Its text goes
   through LocalAgreement-n (``stable_agree``); a Partial event carries text and stable
   prefix.
2. When the silence after the speech makes a pause (200 ms), the session asks for a
   speculative FINAL on the window the final will have if the endpoint confirms this pause
   (the part of its tail not heard yet is filled from the pause's own audio). If speech
   resumes, that result is discarded.
3. At the endpoint (or max length, ``finalize()``, ``stop()``) the utterance closes at the
   segmenter's end position; the speculative result is used if it was decoded on the final's
   window, else a FINAL request goes out (``final_beam_size``, word timestamps, prefix =
   stable).
4. The final's text is spliced to start with the stable words; words are shifted to absolute
   stream seconds. An empty final (the model heard nothing) emits nothing.
5. With ``revisions``, once audio after the final exists, a refinement decodes it again with
   that lookahead (``refine.py``, a lane of its own beside the live request) and a Revision
   follows if it reads other words. Live finals and their context do not change for it.

Every decode is in context: its window starts up to ``context_s`` before the utterance (as
much as fits in Whisper's 30 s) and the stream's finals for that span are forced as the
decoder's prefix, so the model hears the utterance as it heard the conversation, and only the
new words come back (``DecodeRequest.context``).

The session holds the stream's state and runs the loop (decisions in, the next request out);
each job is a module of its own: ``lifecycle`` (listening, finishing, done), ``tuning`` (the
config and its changes mid-stream), ``segments``
(the VAD's decisions applied to the utterances), ``utterances`` (tracking and numbering),
``planner`` (which request, which window), ``end_check`` (a long utterance's partial waits
while its speech may be ending), ``live_requests`` (ids, the plan of each request,
the one in flight), ``requests`` (a plan's request), ``publisher`` (results into events),
``results`` (a result's usable text and words), ``speculation``, ``context`` (the stream's
recent finals), ``agreement`` (stable words and splicing), ``speakers`` (voice signatures and
diarize audio), ``retention`` (the audio still needed), ``config`` (SessionConfig,
re-exported here) and ``audio_buffer``; ``refine`` and ``refine_lane`` the refinement pass.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable

import numpy as np
from kettle.streaming.core import retention
from kettle.streaming.core.audio_buffer import AudioBuffer, as_mono_float32
from kettle.streaming.core.config import SessionConfig
from kettle.streaming.core.context import ContextHistory
from kettle.streaming.core.end_check import EndCheck, SpeechProbe, silero_probe, speech_after
from kettle.streaming.core.events import Done, Event, Finalized
from kettle.streaming.core.lifecycle import Lifecycle, Move, SessionState
from kettle.streaming.core.live_requests import LiveRequests
from kettle.streaming.core.planner import HOLD_PARTIAL_FRAMES, StreamState, plan_next
from kettle.streaming.core.publisher import Publisher
from kettle.streaming.core.refine import RefineStats
from kettle.streaming.core.refine_lane import RefineLane
from kettle.streaming.core.requests import PARTIAL_MAX_TOKENS
from kettle.streaming.core.segments import SegmentDecisions
from kettle.streaming.core.speakers import Speakers
from kettle.streaming.core.tail import SHORT_CHUNKS, SHORT_PROBABILITY
from kettle.streaming.core.tuning import Tuning
from kettle.streaming.core.utterances import UtteranceTracker
from kettle.streaming.core.vad import FRAME_SAMPLES, FrameClassifier, Segmenter
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeRequest, DecodeResult

__all__ = ["PARTIAL_MAX_TOKENS", "Session", "SessionConfig"]

MAX_BACKOFF = 8.0


class Session:
    """See the module docstring. Not thread-safe; one owner drives it."""

    def __init__(
        self,
        config: SessionConfig | None = None,
        *,
        session_id: str = "session",
        classifier: FrameClassifier | None = None,
        speech_probe: SpeechProbe | None = None,
    ) -> None:
        self._tuning = Tuning(config or SessionConfig())
        self.session_id = session_id
        self._life = Lifecycle()
        self._stop_reason: str | None = None
        self._segmenter = Segmenter(self.config.segmenter_config(), classifier)
        self._buf = AudioBuffer()
        self._fed = 0
        self._utts = UtteranceTracker()
        self._history = ContextHistory(
            int(self.config.context_s * SAMPLE_RATE), prompt=self.config.prompt or ""
        )
        self._live = LiveRequests(session_id)
        # The refinement pass has a lane of its own (refine_lane.py), beside the live request.
        self._refine = None
        if self.config.revisions:
            refine_id = functools.partial(self._live.new_id, "r")  # one count with live ids
            self._refine = RefineLane(
                self.config, session_id, self._buf, self._utts, self._history, refine_id
            )
        self._requests: list[DecodeRequest] = []
        self._events: list[Event] = []
        emit = self._events.append
        self._speakers = Speakers(self._buf, diarize=self.config.diarize)
        self._segments = SegmentDecisions(
            self._tuning, self._segmenter, self._utts, self._speakers, emit
        )
        probe = speech_probe or silero_probe
        speech_in = functools.partial(
            speech_after,
            self._buf,
            probe=probe,
            threshold=SHORT_PROBABILITY,
            min_chunks=SHORT_CHUNKS,
        )
        self._publisher = Publisher(
            session_id, self._utts, self._history, self._speakers, self._refine, emit,
            vad_events=self.config.vad_events, revisions=self.config.revisions,
            stable_max_no_speech=self.config.stable_max_no_speech, speech_in=speech_in,
        )  # fmt: skip
        self._backoff = 1.0
        self._end_check = EndCheck.of(self.config.partial_end_check_s, speech_probe)
        # Set by the engine: a longer partial interval than the config's (from the measured
        # decode cost, or stretched under load); math.inf pauses partials.
        self.interval_hint_s: float | None = None

    # --- queries -------------------------------------------------------------------------
    @property
    def config(self) -> SessionConfig:
        return self._tuning.config

    @property
    def samples_fed(self) -> int:
        return self._fed

    @property
    def undecoded_samples(self) -> int:
        """Audio held for decodes still to come: from the oldest utterance without its final
        (or what the VAD still needs) to the end of the audio fed. Context kept for later
        windows is not counted: it is already decoded."""
        return max(0, self._fed - retention.undecoded_start(self._segmenter, self._utts))

    @property
    def done(self) -> bool:
        return self._life.done

    @property
    def stopping(self) -> bool:
        return not self._life.listening

    @property
    def in_flight(self) -> str | None:
        return self._live.in_flight

    @property
    def busy(self) -> bool:
        """A decode of this session is queued or running (live, or a refinement)."""
        return self._live.in_flight is not None or (self._refine is not None and self._refine.busy)

    @property
    def refinements(self) -> RefineStats | None:
        """What the refinement pass did so far; None when revisions are off."""
        return self._refine.stats if self._refine is not None else None

    @property
    def finals_sent(self) -> int:
        return self._utts.finals

    @property
    def pausing(self) -> bool:
        """Silence has begun in the open utterance (partials hold for it): its speculative
        final, then its final, may be asked for within the final's tail."""
        return self._segmenter.silence_frames >= HOLD_PARTIAL_FRAMES

    @property
    def speaking(self) -> bool:
        """An utterance is open: its final may be asked for before long."""
        return self._segmenter.in_utterance

    @property
    def final_headroom_s(self) -> float | None:
        """Seconds of audio before this stream's next final can come due: the endpoint's
        silence still to come (0 in a pause: its speculative final is asked for now); None
        when no utterance is open."""
        seg = self._segmenter
        if not seg.in_utterance:
            return None
        if self.pausing:
            return 0.0
        frames = max(0, seg.config.endpoint_frames - seg.silence_frames)
        return frames * FRAME_SAMPLES / SAMPLE_RATE

    @property
    def final_due(self) -> bool:
        """A closed utterance waits for its final (the engine promotes or withdraws what this
        session has queued so the final need not wait behind it)."""
        return bool(self._utts.closed)

    @property
    def superseded(self) -> str | None:
        """The id of the request in flight if it is no longer the most useful one (a partial
        while a final is due, or a void speculative final): the engine withdraws it if still
        queued and reports it dropped (``on_dropped``)."""
        return self._live.superseded(self._utts)

    @property
    def endpoints(self) -> dict[int, int]:
        """Final number -> stream position at which its end was decided."""
        return self._utts.endpoints

    @property
    def keyterms(self) -> tuple[str, ...]:
        return self.config.keyterms

    def poll_requests(self) -> list[DecodeRequest]:
        out, self._requests = self._requests, []
        return out

    def poll_events(self) -> list[Event]:
        out = list(self._events)
        self._events.clear()  # the same list: the publisher and segments append to it
        return out

    def take_speech(self, number: int) -> np.ndarray | None:
        """Final ``number``'s audio (with diarize, once: the speaker labeler embeds it)."""
        return self._speakers.take_speech(number)

    def take_closed_speech(self) -> list[tuple[int, np.ndarray]]:
        """(start, audio) of the utterances closed since the last call (with diarize): what
        their finals will cover, unless a final ends elsewhere."""
        return self._speakers.take_closed_speech()

    # --- inputs --------------------------------------------------------------------------
    def feed_audio(self, samples: np.ndarray) -> None:
        if self.stopping:
            return  # PROTOCOL: anything after stop is ignored
        audio = as_mono_float32(samples)
        if len(audio) == 0:
            return
        self._buf.append(audio)
        self._fed += len(audio)
        self._segments.apply(self._segmenter.feed(audio))
        retention.trim(self._buf, self._history, self._segmenter, self._utts, self._refine)
        self._pump()

    def set_keyterms(self, terms: tuple[str, ...]) -> None:
        """Keyterms for every decode asked from now on (a request in flight keeps its own);
        ``terms`` as transcribe.keyterms.normalize gives them."""
        self._tuning.set_keyterms(terms)

    def set_endpoint_silence(self, ms: int) -> None:
        """The silence that ends an utterance from now on (also for the open one, whose
        silence so far counts); ConfigError outside SessionConfig's range."""
        self._segmenter.reconfigure(self._tuning.set_endpoint_silence(ms))

    def reconfigure(self, config: SessionConfig) -> None:
        """Take ``config``'s changeable fields (config.py says which, and from when): the
        utterances opened from now on are decoded with its language, prompt and word
        timestamps, and its SpeechStarted carries the count of reconfigures so far;
        ConfigError if a field is out of range (nothing then changes)."""
        self._segmenter.reconfigure(self._tuning.reconfigure(config, self._fed))
        self._pump()  # partials switched on may be due

    def finalize(self, *, new_request: bool = False) -> None:
        """End the open utterance now; with ``new_request``, what follows is a request of
        its own (a Wyoming round): no earlier final is its context or prompt."""
        if self.stopping:
            return
        self._segments.apply(self._segmenter.finalize())
        if new_request:
            self._tuning.new_request(self._fed)
        if self.config.vad_events:
            self._events.append(Finalized(self._fed))
        self._pump()

    def stop(self, reason: str | None = None) -> None:
        if self.stopping:
            return
        self._life.move(Move.STOP)
        self._stop_reason = reason
        self._segments.apply(self._segmenter.stop())
        self._pump()

    def on_result(self, result: DecodeResult) -> None:
        if self._refinement_done(result.request_id, result):
            return
        pending = self._live.take(result.request_id)
        if pending is None:
            return
        if result.error is not None:
            self._publisher.failure(pending, result.error)
        elif pending.kind is DecodeKind.PARTIAL:
            if self._publisher.partial(pending, result) and self._backoff > 1.0:
                self._backoff = max(1.0, self._backoff / 2)
        else:
            self._publisher.final(pending, result, partials=self.config.partials)
        self._pump()

    def on_dropped(self, request_id: Hashable, *, overloaded: bool = False) -> None:
        """The engine did not run a request: the scheduler skipped it, or a partial failed.

        A dropped final is asked for again (the engine never drops finals on purpose); a
        dropped refinement is skipped.
        """
        if self._refinement_done(request_id, None):
            return
        pending = self._live.take(request_id)
        if pending is None:
            return
        if pending.kind is DecodeKind.PARTIAL and overloaded:
            # Skipped for load: ask less often (the engine's load control tells the client).
            self._backoff = min(MAX_BACKOFF, self._backoff * 2)
        if pending.plan.speculative:
            pending.utterance.speculation.invalidate()
        self._pump()

    def on_failed(self, request_id: Hashable, message: str) -> None:
        """A request failed for good (the engine already retried finals)."""
        if self._refinement_done(request_id, None):
            return
        pending = self._live.take(request_id)
        if pending is None:
            return
        self._publisher.failure(pending, message)
        self._pump()

    # --- the loop ------------------------------------------------------------------------
    def _pump(self) -> None:
        """Ask for the most useful decode, if none of ours is in flight."""
        if self._live.in_flight is None:
            self._publisher.resolve_ready(self._tuning.planner)
            if self._tuning.planner.max_voice_change is not None:
                self._speakers.update_voice(self._utts, self._segmenter.position)
            state, planner = self._stream_state(), self._tuning.planner_now(self.interval_hint_s)
            plan = plan_next(self._utts, self._history, state, planner)
            if plan is not None and self._end_check and self._end_check.holds(plan, self._buf):
                plan = None  # a long partial waits while the speech may be ending
            if plan is not None:
                request = self._live.ask(plan, state, self._buf, self.config, self.keyterms)
                self._requests.append(request)
        if self._refine is not None:
            language = self._tuning.settings.context_language
            refinement = self._refine.next_request(
                self._fed, stopping=self.stopping, language=language, keyterms=self.keyterms
            )
            if refinement is not None:
                self._requests.append(refinement)
        self._maybe_done()

    def _stream_state(self) -> StreamState:
        seg = self._segmenter
        return StreamState(
            position=seg.position,
            fed=self._fed,
            hush_end=seg.hush_end,
            speech_end=seg.speech_end,
            silence_frames=seg.silence_frames,
            backoff=self._backoff,
            stopping=self.stopping,
        )

    def _maybe_done(self) -> None:
        """After stop, once nothing is left to decode: Done, the session's last event."""
        idle = self._live.in_flight is None and (self._refine is None or self._refine.idle)
        drained = idle and not self._utts.closed and self._utts.open is None
        if self._life.state is SessionState.FINISHING and drained:
            self._life.move(Move.DRAINED)
            self._events.append(Done(self._fed, self._utts.finals, self._stop_reason))

    def _refinement_done(self, request_id: Hashable, result: DecodeResult | None) -> bool:
        """Take back the refinement in flight if ``request_id`` is it (None: it did not run)."""
        if self._refine is None or not self._refine.owns(request_id):
            return False
        revision = self._refine.finish(result)
        if revision is not None:
            self._events.append(revision)
        self._pump()
        return True
