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
new words come back (``DecodeRequest.context``). The jobs are split: ``utterances`` (tracking
and numbering), ``planner`` (which request, which window), ``speculation``, ``context`` (the
stream's recent finals), ``agreement`` (stable words and splicing), ``config``
(SessionConfig, re-exported here), ``requests`` (a plan's request), ``results`` (a
result's usable text and words) and ``audio_buffer``; ``refine`` and ``refine_lane`` the
refinement pass.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
from kettle.streaming.core import voice
from kettle.streaming.core.agreement import Agreement
from kettle.streaming.core.audio_buffer import AudioBuffer, as_mono_float32
from kettle.streaming.core.config import SessionConfig
from kettle.streaming.core.context import ContextHistory, Spoken
from kettle.streaming.core.events import (
    Done,
    Error,
    Event,
    Final,
    Finalized,
    NoTranscript,
    Partial,
    Paused,
    Resumed,
    SpeechStarted,
    SpeechStopped,
)
from kettle.streaming.core.guard import implausible
from kettle.streaming.core.planner import (
    HOLD_PARTIAL_FRAMES,
    Plan,
    PlannerConfig,
    StreamState,
    plan_final,
    plan_next,
)
from kettle.streaming.core.refine import Refinable, RefineStats
from kettle.streaming.core.refine_lane import RefineLane
from kettle.streaming.core.requests import PARTIAL_MAX_TOKENS, build_request, window_audio
from kettle.streaming.core.results import final_words, usable
from kettle.streaming.core.utterances import Utterance, UtteranceTracker
from kettle.streaming.core.vad import (
    FRAME_SAMPLES,
    FrameClassifier,
    Pause,
    Resume,
    Segmenter,
    SpeechEnd,
    SpeechStart,
)
from kettle.transcribe.model.nonspeech import STREAM as NONSPEECH
from kettle.transcribe.types import (
    SAMPLE_RATE,
    DecodeKind,
    DecodeRequest,
    DecodeResult,
    Word,
)

__all__ = ["PARTIAL_MAX_TOKENS", "Session", "SessionConfig"]

logger = logging.getLogger(__name__)

VOICE_STEP = SAMPLE_RATE // 2  # samples of new audio between an open utterance's signatures
MAX_BACKOFF = 8.0
# A final that ended this close before an utterance (a client's finalize at a short pause, a
# cut) is its neighbour: the utterance's text never starts by saying its last words again.
# A speaker who repeats a phrase after a real pause keeps it.
ADJACENT = int(0.5 * SAMPLE_RATE)


@dataclass(frozen=True)
class _Pending:
    plan: Plan

    @property
    def utterance(self) -> Utterance:
        return self.plan.utterance

    @property
    def kind(self) -> DecodeKind:
        return self.plan.kind


class Session:
    """See the module docstring. Not thread-safe; one owner drives it."""

    def __init__(
        self,
        config: SessionConfig | None = None,
        *,
        session_id: str = "session",
        classifier: FrameClassifier | None = None,
    ) -> None:
        self.config = config or SessionConfig()
        self.session_id = session_id
        self._segmenter = Segmenter(self.config.segmenter_config(), classifier)
        self._planner = self.config.planner_config()
        self._buf = AudioBuffer()
        self._fed = 0
        self._utts = UtteranceTracker()
        self._history = ContextHistory(
            int(self.config.context_s * SAMPLE_RATE), prompt=self.config.prompt or ""
        )
        self._in_flight: str | None = None
        # What the utterances opened from now on are decoded with (reconfigure changes it),
        # and how many reconfigures came so far (SpeechStarted.retunes).
        self._settings = self.config.utterance_settings()
        self._retunes = 0
        # With diarize: each published final's audio, until the engine's labeler takes it,
        # and each closed utterance's (start, audio), so its embedding starts at once.
        self._speech: dict[int, np.ndarray] = {}
        self._closed_speech: list[tuple[int, np.ndarray]] = []
        # The refinement pass has a lane of its own (refine_lane.py), beside the live request.
        self._refine = RefineLane(self.config, session_id) if self.config.revisions else None
        self._pending: dict[str, _Pending] = {}
        self._seq = 0
        self._requests: list[DecodeRequest] = []
        self._events: list[Event] = []
        self._backoff = 1.0
        self._stopping = False
        self._stop_reason: str | None = None
        self._done = False
        # Set by the engine: a longer partial interval than the config's (from the measured
        # decode cost, or stretched under load); math.inf pauses partials.
        self.interval_hint_s: float | None = None

    # --- queries -------------------------------------------------------------------------
    @property
    def samples_fed(self) -> int:
        return self._fed

    @property
    def undecoded_samples(self) -> int:
        """Audio held for decodes still to come: from the oldest utterance without its final
        (or what the VAD still needs) to the end of the audio fed. Context kept for later
        windows is not counted: it is already decoded."""
        keep = self._segmenter.earliest_needed()
        oldest = self._utts.oldest_unresolved()
        if oldest is not None:
            keep = min(keep, oldest.start)
        return max(0, self._fed - keep)

    @property
    def done(self) -> bool:
        return self._done

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def in_flight(self) -> str | None:
        return self._in_flight

    @property
    def busy(self) -> bool:
        """A decode of this session is queued or running (live, or a refinement)."""
        return self._in_flight is not None or (self._refine is not None and self._refine.busy)

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
        """The id of the request in flight if it is no longer the most useful one: a partial
        while a final is due, or a speculative final that speech resuming made void. The
        engine withdraws it if still queued and reports it dropped (``on_dropped``)."""
        rid = self._in_flight
        if rid is None:
            return None
        plan = self._pending[rid].plan
        if plan.kind is DecodeKind.PARTIAL:
            return rid if self._utts.closed else None
        utt = plan.utterance
        if plan.speculative and (
            utt.speculation.window_end != plan.end
            or (utt.end is not None and not utt.speculation.matches(utt.end, utt.speech_end))
        ):
            return rid
        return None

    @property
    def endpoints(self) -> dict[int, int]:
        """Final number -> stream position at which its end was decided."""
        return self._utts.endpoints

    def poll_requests(self) -> list[DecodeRequest]:
        out, self._requests = self._requests, []
        return out

    def poll_events(self) -> list[Event]:
        out, self._events = self._events, []
        return out

    # --- inputs --------------------------------------------------------------------------
    def feed_audio(self, samples: np.ndarray) -> None:
        if self._stopping:
            return  # PROTOCOL: anything after stop is ignored
        audio = as_mono_float32(samples)
        if len(audio) == 0:
            return
        self._buf.append(audio)
        self._fed += len(audio)
        self._handle(self._segmenter.feed(audio))
        self._trim()
        self._pump()

    @property
    def keyterms(self) -> tuple[str, ...]:
        return self.config.keyterms

    def take_speech(self, number: int) -> np.ndarray | None:
        """Final ``number``'s audio (with diarize, once: the speaker labeler embeds it)."""
        return self._speech.pop(number, None)

    def take_closed_speech(self) -> list[tuple[int, np.ndarray]]:
        """(start, audio) of the utterances closed since the last call (with diarize): what
        their finals will cover, unless a final ends elsewhere."""
        closed, self._closed_speech = self._closed_speech, []
        return closed

    def set_keyterms(self, terms: tuple[str, ...]) -> None:
        """Keyterms for every decode asked from now on (a request in flight keeps its own);
        ``terms`` as transcribe.keyterms.normalize gives them."""
        self.config = dataclasses.replace(self.config, keyterms=terms)

    def set_endpoint_silence(self, ms: int) -> None:
        """The silence that ends an utterance from now on (also for the open one, whose
        silence so far counts); ConfigError outside SessionConfig's range."""
        config = dataclasses.replace(self.config, endpoint_silence_ms=ms)  # validates it
        self.config = config
        self._segmenter.reconfigure(config.segmenter_config())
        self._planner = config.planner_config()  # (its final tail depends on the endpoint)

    def reconfigure(self, config: SessionConfig) -> None:
        """Take ``config``'s changeable fields (config.py says which, and from when): the
        utterances opened from now on are decoded with its language, prompt and word
        timestamps, and its SpeechStarted carries the count of reconfigures so far;
        ConfigError if a field is out of range (nothing then changes)."""
        new = self.config.changed_to(config)
        prompt_from = self._settings.prompt_from if new.prompt == self.config.prompt else self._fed
        self.config = new
        self._settings = new.utterance_settings(prompt_from)
        self._retunes += 1
        self._segmenter.reconfigure(new.segmenter_config())
        self._planner = new.planner_config()
        self._pump()  # partials switched on may be due

    def finalize(self) -> None:
        if self._stopping:
            return
        self._handle(self._segmenter.finalize())
        if self.config.vad_events:
            self._events.append(Finalized(self._fed))
        self._pump()

    def stop(self, reason: str | None = None) -> None:
        if self._stopping:
            return
        self._stopping = True
        self._stop_reason = reason
        self._handle(self._segmenter.stop())
        self._pump()

    def on_result(self, result: DecodeResult) -> None:
        if self._refinement_done(result.request_id, result):
            return
        pending = self._take(result.request_id)
        if pending is None:
            return
        if result.error is not None:
            self._on_failure(pending, result.error)
        elif pending.kind is DecodeKind.PARTIAL:
            self._on_partial(pending, result)
        else:
            self._on_final(pending, result)
        self._pump()

    def on_dropped(self, request_id: Hashable, *, overloaded: bool = False) -> None:
        """The engine did not run a request: the scheduler skipped it, or a partial failed.

        A dropped final is asked for again (the engine never drops finals on purpose); a
        dropped refinement is skipped.
        """
        if self._refinement_done(request_id, None):
            return
        pending = self._take(request_id)
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
        pending = self._take(request_id)
        if pending is None:
            return
        self._on_failure(pending, message)
        self._pump()

    # --- request plumbing ----------------------------------------------------------------
    def _take(self, request_id: Hashable) -> _Pending | None:
        if not isinstance(request_id, str) or request_id not in self._pending:
            return None
        if self._in_flight == request_id:
            self._in_flight = None
        return self._pending.pop(request_id)

    def _request(self, plan: Plan) -> None:
        rid = self._next_id()
        utt = plan.utterance
        audio = window_audio(self._buf, plan, self._segmenter.speech_end)
        request = build_request(plan, self.config, self.session_id, rid, audio, self.keyterms)
        if plan.speculative:
            seg = self._segmenter
            assert utt.end is None and seg.hush_end is not None and seg.speech_end is not None
            utt.speculation.request(plan.end, seg.hush_end, seg.speech_end)
        elif plan.kind is DecodeKind.PARTIAL:
            utt.last_partial_end = plan.end
        self._pending[rid] = _Pending(plan)
        self._in_flight = rid
        self._requests.append(request)

    def _next_id(self, prefix: str = "") -> str:
        self._seq += 1
        return f"{self.session_id}/{prefix}{self._seq}"

    def _pump(self) -> None:
        """Ask for the most useful decode, if none of ours is in flight."""
        if self._in_flight is None:
            self._resolve_ready()
            if self._planner.max_voice_change is not None:
                self._update_voices()
            plan = plan_next(self._utts, self._history, self._stream_state(), self._planner_now())
            if plan is not None:
                self._request(plan)
        if self._refine is not None:
            request = self._refine.next_request(
                functools.partial(self._next_id, "r"),
                self._buf,
                self._fed,
                self._utts,
                self._history,
                stopping=self._stopping,
                language=self._settings.context_language,
                keyterms=self.keyterms,
            )
            if request is not None:
                self._requests.append(request)
        self._maybe_done()

    def _resolve_ready(self) -> None:
        """Close the utterances at the head of the queue that need no decode."""
        while self._utts.closed:
            utt = self._utts.closed[0]
            assert utt.end is not None
            ready = utt.speculation.ready(utt.end, utt.speech_end)
            if ready is not None:
                self._utts.take(utt)
                self._emit_final(utt, ready, plan_final(utt, self._history, self._planner))
            elif utt.end <= utt.start:
                self._utts.take(utt)
                self._resolve_empty(utt)
            else:
                return

    def _update_voices(self) -> None:
        """Voice signatures of the utterances a plan may be for: the closed one at the head
        of the queue, else the open one (over its first seconds, once it has them)."""
        utt = self._utts.closed[0] if self._utts.closed else self._utts.open
        if utt is None or utt.voice_final:
            return
        end = utt.end if utt.end is not None else self._segmenter.position
        end = min(end, utt.start + int(voice.SIGNATURE_S * SAMPLE_RATE))
        final = utt.end is not None or end - utt.start >= voice.SIGNATURE_S * SAMPLE_RATE
        # The session pumps on every chunk: an open utterance's signature is taken again
        # only every VOICE_STEP of new audio (a few times per utterance), not per chunk.
        if not final and end - utt.voice_end < VOICE_STEP:
            return
        utt.voice = voice.signature(self._buf.slice(utt.start, end))
        utt.voice_end, utt.voice_final = end, final

    def _planner_now(self) -> PlannerConfig:
        """The planner's config with the engine's partial cadence, if it set a longer one
        (an utterance's first partial still comes at the configured interval)."""
        hint = self.interval_hint_s
        if hint is None or hint <= self.config.partial_interval_s:
            return self._planner
        if math.isinf(hint):
            return dataclasses.replace(self._planner, partials=False)  # partials paused
        return dataclasses.replace(self._planner, later_partial_interval=int(hint * SAMPLE_RATE))

    def _stream_state(self) -> StreamState:
        seg = self._segmenter
        return StreamState(
            position=seg.position,
            fed=self._fed,
            hush_end=seg.hush_end,
            speech_end=seg.speech_end,
            silence_frames=seg.silence_frames,
            backoff=self._backoff,
            stopping=self._stopping,
        )

    def _maybe_done(self) -> None:
        if (
            self._stopping
            and not self._done
            and self._in_flight is None
            and not self._utts.closed
            and self._utts.open is None
            and (self._refine is None or self._refine.idle)
        ):
            self._done = True
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

    # --- segmenter decisions -------------------------------------------------------------
    def _handle(self, decisions: list[object]) -> None:
        for d in decisions:
            if isinstance(d, SpeechStart):
                self._utts.next_start(d.start)
                agreement = Agreement(self.config.stable_holdback, self.config.stable_agree)
                self._utts.start(d.start, agreement, self._settings)
                if self.config.vad_events:
                    self._events.append(SpeechStarted(d.start, self._retunes))
            elif isinstance(d, Pause):
                # The planner reads the pause state from the segmenter.
                utt = self._utts.open
                if self.config.pause_events and utt is not None:
                    # The pause is heard tail_frames after the last voiced frame.
                    tail = self._segmenter.config.tail_frames * FRAME_SAMPLES
                    self._events.append(Paused(utt.start, max(utt.start, d.end - tail), d.end))
            elif isinstance(d, Resume):
                if self._utts.open is not None:
                    self._utts.open.speculation.invalidate()  # speech is back
                    if self.config.pause_events:
                        at = self._segmenter.position
                        self._events.append(Resumed(self._utts.open.start, at))
            elif isinstance(d, SpeechEnd):
                # The final's window keeps the silence after the speech, up to the final's
                # tail; only audio known to be silence (a cut, or a finalize mid-speech, keeps
                # none: what follows belongs to the next utterance).
                tail_end = d.speech_end + self._planner.final_tail
                limit = min(max(d.end, tail_end), d.silent_until)
                utt = self._utts.close(d.end, limit, self._segmenter.position)
                if utt is None:
                    continue
                utt.end_reason = d.reason
                utt.speech_end = d.speech_end
                if self.config.diarize and utt.end is not None and utt.end > utt.start:
                    self._closed_speech.append((utt.start, self._buf.slice(utt.start, utt.end)))
                utt.sealed = d.reason in ("endpoint", "max_length") or d.silent_until > d.end
                if not utt.speculation.matches(d.end, d.speech_end):
                    utt.speculation.invalidate()
                if self.config.vad_events:
                    self._events.append(SpeechStopped(utt.start, d.end, d.reason))

    def _trim(self) -> None:
        keep = self._segmenter.earliest_needed()
        oldest = self._utts.oldest_unresolved()
        if oldest is not None:
            keep = min(keep, oldest.start)
        refining = self._refine.earliest_needed() if self._refine is not None else None
        if refining is not None:
            keep = min(keep, refining)
        self._history.forget_before(keep)
        context = self._history.earliest_needed()
        if context is not None:
            keep = min(keep, context)
        self._buf.trim(keep)

    # --- results -------------------------------------------------------------------------
    def _rejected(self, plan: Plan, result: DecodeResult) -> bool:
        """A decode in context that reads as a hallucination: the utterance is decoded
        alone from now on (the result is dropped, and a final asked for again)."""
        utt = plan.utterance
        if not plan.context.text or utt.alone:
            return False
        if not implausible(result, (plan.end - utt.start) / SAMPLE_RATE):
            return False
        logger.info("%s: a decode in context looked hallucinated; decoding alone", self.session_id)
        utt.alone = True
        if plan.speculative:
            utt.speculation.invalidate()
        return True

    def _on_partial(self, pending: _Pending, result: DecodeResult) -> None:
        utt = pending.utterance
        if utt is not self._utts.open:
            return  # the utterance closed meanwhile; its final supersedes this
        if self._rejected(pending.plan, result):
            return
        if self._backoff > 1.0:
            self._backoff = max(1.0, self._backoff / 2)
        self._show(utt, pending.plan, result)

    def _show(
        self, utt: Utterance, plan: Plan, result: DecodeResult, *, speculative: bool = False
    ) -> None:
        """A new hypothesis of the open utterance: agreement, then a Partial if not empty.
        One the model doubts is speech shows its words but makes none stable: a stable word
        is forced into the final, and on babble the final found no speech."""
        text = usable(result, plan, **self._neighbourhood(utt))[0]
        if not text and not utt.agreement.stable_text:
            return
        trusted = NONSPEECH.sure_of_speech(result.no_speech_prob)
        hyp = utt.agreement.update(text, trusted=trusted)
        if not hyp.text:
            return
        number = self._utts.number(utt)
        utt.last_partial_text = hyp.text
        self._events.append(
            Partial(number, utt.start, plan.heard_until, hyp.text, hyp.stable, speculative)
        )

    def _neighbourhood(self, utt: Utterance) -> dict[str, bool]:
        """``usable``'s view of the final before ``utt``: adjacent, and forced mid-speech."""
        near = self._history.neighbour(utt.start, ADJACENT)
        forced = near is not None and not near.sealed and near.end == utt.start
        return {"adjacent": near is not None, "forced": forced}

    def _on_final(self, pending: _Pending, result: DecodeResult) -> None:
        utt, plan = pending.utterance, pending.plan
        if self._rejected(plan, result):
            return  # the planner asks again, without context
        if plan.speculative:
            if not utt.speculation.accept(plan.end, result):
                return  # speech resumed: discarded
            if utt.end is None:
                if self.config.partials:
                    # Show the whole utterance's text now: the final will start with it.
                    self._show(utt, plan, result, speculative=True)
                return
            if utt.speculation.ready(utt.end, utt.speech_end) is None:
                return  # the utterance ended elsewhere: the real final is asked for
        if self._utts.take(utt):
            self._emit_final(utt, result, plan)

    def _on_failure(self, pending: _Pending, message: str) -> None:
        utt = pending.utterance
        if pending.kind is DecodeKind.PARTIAL:
            return
        if pending.plan.speculative and utt.end is None:
            utt.speculation.fail()  # no second try in this pause; the endpoint asks again
            return
        if pending.plan.speculative:
            utt.speculation.invalidate()
        if not self._utts.take(utt):
            return
        assert utt.end is not None
        span = f"{utt.start / SAMPLE_RATE:.3f}-{utt.end / SAMPLE_RATE:.3f} s"
        name = f"utterance {utt.number} ({span})" if utt.number is not None else f"audio {span}"
        self._events.append(Error("internal", f"could not transcribe {name}: {message}"))
        if utt.number is not None and utt.last_partial_text:
            # The client already saw this number: close it with the best text we have, so
            # finals keep their numbering without gaps.
            self._publish(utt, utt.last_partial_text, (), "en")
        else:
            self._resolve_empty(utt)

    def _emit_final(self, utt: Utterance, result: DecodeResult, plan: Plan) -> None:
        kept, model_words = usable(result, plan, **self._neighbourhood(utt))
        text = utt.agreement.finalize(kept)
        if not text:
            self._resolve_empty(utt)
            return
        timed = utt.settings.word_timestamps or self.config.revisions
        words = final_words(utt, model_words, plan) if timed else ()
        self._publish(utt, text, words, result.language or "en")

    def _publish(self, utt: Utterance, text: str, words: tuple[Word, ...], language: str) -> None:
        assert utt.end is not None
        number = self._utts.published(utt)
        if self.config.diarize:
            self._speech[number] = self._buf.slice(utt.start, utt.end)
        self._history.add(Spoken(utt.start, utt.end, text, language, utt.sealed, utt.voice))
        self._events.append(
            Final(number, utt.start, utt.end, text, words, language, utt.end_reason)
        )
        if self._refine is not None:
            self._refine.published(Refinable(number, utt.start, utt.end, text, words, language))

    def _resolve_empty(self, utt: Utterance) -> None:
        language = utt.settings.context_language
        if not utt.sealed and utt.end is not None and utt.end > utt.start and language:
            # Cut mid-speech and read as nothing (a finalize every 100 ms): its audio is
            # the next utterance's context, with no text, so its words come back there.
            self._history.add(Spoken(utt.start, utt.end, "", language, False, utt.voice))
        if self.config.vad_events:
            self._events.append(NoTranscript(utt.start))
        self._utts.release(utt)
