"""One stream's state machine: audio in, decode requests and events out.

Pure: no I/O, no threads, no wall clock; its clock is the number of samples received. The
engine (or a test) feeds it audio, control calls and decode results, then collects what it
produced with ``poll_requests()`` and ``poll_events()``.

The path of an utterance:

1. The VAD segmenter opens it (with pre-roll). While it is open, every ``partial_interval_s``
   of new audio (stretched under overload) a PARTIAL request covers the utterance so far,
   greedy, prompted with the stream's previous final, forced to start with the stable words.
   Its text goes through LocalAgreement-2; a Partial event carries text and stable prefix.
2. When the segmenter sees a pause (``tail`` of silence), the session asks for one PARTIAL on
   exactly the window [start, speech end + tail] (unless the last one was that window) and
   then a speculative FINAL on the same window, which hits the adapter's encoder cache. If
   speech resumes, that final is discarded.
3. At the endpoint (or max length, ``finalize()``, ``stop()``) the utterance closes at the
   segmenter's end position; the speculative result is used if its window is the final
   window, else a FINAL request goes out (beam search, word timestamps, prefix = stable).
4. The final's text is spliced to start with the stable words; words are shifted to absolute
   stream seconds. An empty final (the model heard nothing) emits nothing.

Numbering: an utterance gets its number with its first non-empty partial or its final,
whichever comes first. Finals of closed utterances are always requested before any partial of
the next one (and at most one request of a session is in flight), so when an utterance takes
a number every earlier one is resolved and numbers come in order. If an utterance that showed
partials (and so holds a number) ends with an empty final and no stable words, its number is
released and the next utterance takes it: the client saw only partials for it, which the next
utterance's partials then replace, and finals stay 0, 1, 2, ... without gaps.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np
from kettle.streaming.agreement import Agreement, normalized
from kettle.streaming.events import (
    Done,
    Error,
    Event,
    Final,
    Finalized,
    NoTranscript,
    Partial,
    SpeechStarted,
    SpeechStopped,
)
from kettle.streaming.vad import (
    FRAME_SAMPLES,
    FrameClassifier,
    Pause,
    Resume,
    Segmenter,
    SegmenterConfig,
    SpeechEnd,
    SpeechStart,
)
from kettle.transcribe.errors import AudioError, ConfigError
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeRequest, DecodeResult, Word

logger = logging.getLogger(__name__)

OVERLOAD_NOTICE_INTERVAL = 5 * SAMPLE_RATE  # samples of stream audio between notices
MAX_BACKOFF = 8.0
PROMPT_CHARS = 200
ENDPOINTS_KEPT = 256  # end-decision positions kept for latency measurement (simulate)
# A partial's window may serve as the speculative final's if it reaches this far past the
# last voiced frame (the rest of the tail is silence).
SPEC_MARGIN = 5 * FRAME_SAMPLES
HOLD_PARTIAL_FRAMES = 6  # > SPEC_MARGIN, so a held-back partial may still serve the final
FINAL_BEAM_SIZE = 5
PARTIAL_MAX_TOKENS = 96

# Whisper's own no-speech rule: a window the model thinks is silence, decoded with low
# confidence, is treated as empty.
NO_SPEECH_PROB = 0.6
NO_SPEECH_LOGPROB = -1.0


@dataclass(frozen=True)
class SessionConfig:
    language: str | None = None
    partials: bool = True
    word_timestamps: bool = False
    partial_interval_s: float = 0.5
    endpoint_silence_ms: int = 500
    preroll_ms: int = 250
    onset_ms: int = 60
    max_utterance_s: float = 29.0
    vad_aggressiveness: int = 2
    speculative_final: bool = True
    # Text the first utterance is conditioned on (names, vocabulary); later ones get the
    # stream's previous finals.
    prompt: str | None = None
    # Also emit SpeechStarted / SpeechStopped / NoTranscript / Finalized (protocols that
    # report the VAD or group utterances by the client's commits).
    vad_events: bool = False

    def __post_init__(self) -> None:
        if self.language is not None and not (
            isinstance(self.language, str)
            and 2 <= len(self.language) <= 3
            and self.language.isalpha()
        ):
            raise ConfigError(f"language must be an ISO 639-1 code or None, not {self.language!r}")
        if not 0.1 <= self.partial_interval_s <= 10.0:
            raise ConfigError(
                f"partial_interval_s must be within 0.1..10, not {self.partial_interval_s}"
            )
        self.segmenter_config()  # validates the VAD fields

    def segmenter_config(self) -> SegmenterConfig:
        return SegmenterConfig(
            aggressiveness=self.vad_aggressiveness,
            onset_ms=self.onset_ms,
            endpoint_silence_ms=self.endpoint_silence_ms,
            preroll_ms=self.preroll_ms,
            max_utterance_s=self.max_utterance_s,
            cut_search_s=min(SegmenterConfig.cut_search_s, self.max_utterance_s / 2),
            tail_ms=min(SegmenterConfig.tail_ms, self.endpoint_silence_ms),
        )


@dataclass
class _Utterance:
    ordinal: int  # internal, counts every utterance the VAD opened
    start: int
    end: int | None = None
    number: int | None = None
    agreement: Agreement = field(default_factory=Agreement)
    last_partial_end: int = 0  # window end of the last partial requested
    last_partial_text: str = ""
    spec_end: int | None = None  # window end of the wanted/requested speculative final
    spec_requested: bool = False
    spec_target: int | None = None  # the pause end (utterance end) the speculation is for
    spec_result: DecodeResult | None = None
    decided_at: int | None = None  # stream position when the end was decided
    end_reason: str | None = None  # the segmenter's SpeechEnd reason


@dataclass(frozen=True)
class _Pending:
    utterance: _Utterance
    kind: DecodeKind
    start: int
    end: int
    speculative: bool = False


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
        self._buf = _AudioBuffer()
        self._fed = 0
        self._open: _Utterance | None = None
        self._closed: deque[_Utterance] = deque()
        self._ordinals = 0
        self._next_number = 0
        self._finals = 0
        self._in_flight: str | None = None
        self._pending: dict[str, _Pending] = {}
        self._seq = 0
        self._requests: list[DecodeRequest] = []
        self._events: list[Event] = []
        self._prompt = (self.config.prompt or "").strip()[-PROMPT_CHARS:]
        self._backoff = 1.0
        self._last_notice: int | None = None
        self._stopping = False
        self._stop_reason: str | None = None
        self._done = False
        # final number -> position of the end decision, for the last ENDPOINTS_KEPT finals
        self.endpoints: dict[int, int] = {}
        # Set by the engine: a longer partial interval than the config's (from the measured
        # decode cost, or stretched under load); math.inf pauses partials.
        self.interval_hint_s: float | None = None

    # --- queries -------------------------------------------------------------------------
    @property
    def samples_fed(self) -> int:
        return self._fed

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
    def undecoded_samples(self) -> int:
        """Audio held for decodes still to come: from the oldest utterance without its final
        (or what the VAD still needs) to the end of the audio fed."""
        return max(0, self._fed - self._keep_from())

    @property
    def finals_sent(self) -> int:
        return self._finals

    @property
    def final_due(self) -> bool:
        """A closed utterance waits for its final (the engine promotes or withdraws what this
        session has queued so the final need not wait behind it)."""
        return bool(self._closed)

    @property
    def superseded(self) -> str | None:
        """The id of the request in flight if it is no longer the most useful one: a partial
        while a final is due, or a speculative final that speech resuming made void. The
        engine withdraws it if still queued and reports it dropped (``on_dropped``)."""
        rid = self._in_flight
        if rid is None:
            return None
        pending = self._pending[rid]
        if pending.kind is DecodeKind.PARTIAL:
            return rid if self._closed else None
        utt = pending.utterance
        if pending.speculative and (
            not utt.spec_requested
            or utt.spec_end != pending.end
            or (utt.end is not None and utt.spec_target != utt.end)
        ):
            return rid
        return None

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
        audio = _as_mono_float32(samples)
        if len(audio) == 0:
            return
        self._buf.append(audio)
        self._fed += len(audio)
        self._handle(self._segmenter.feed(audio))
        self._trim()
        self._pump()

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

        A dropped final is asked for again (the engine never drops finals on purpose).
        """
        pending = self._take(request_id)
        if pending is None:
            return
        if pending.kind is DecodeKind.PARTIAL and overloaded:
            self._backoff = min(MAX_BACKOFF, self._backoff * 2)
            if (
                self._last_notice is None
                or self._fed - self._last_notice >= OVERLOAD_NOTICE_INTERVAL
            ):
                self._last_notice = self._fed
                self._events.append(
                    Error("overloaded", "the server is skipping partials for now; finals follow")
                )
        if pending.kind is DecodeKind.FINAL and pending.speculative:
            pending.utterance.spec_requested = False
            pending.utterance.spec_end = None
        self._pump()

    def on_failed(self, request_id: Hashable, message: str) -> None:
        """A request failed for good (the engine already retried finals)."""
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

    def _request(
        self, utt: _Utterance, kind: DecodeKind, end: int, *, speculative: bool = False
    ) -> None:
        self._seq += 1
        rid = f"{self.session_id}/{self._seq}"
        start = utt.start
        audio = self._buf.slice(start, end)
        final = kind is DecodeKind.FINAL
        prefix = utt.agreement.stable_text or None
        request = DecodeRequest(
            audio=audio,
            kind=kind,
            request_id=rid,
            prompt=self._prompt[-PROMPT_CHARS:] or None,
            prefix=prefix,
            language=self.config.language,
            word_timestamps=final and self.config.word_timestamps,
            beam_size=FINAL_BEAM_SIZE if final else 1,
            max_new_tokens=None if final else PARTIAL_MAX_TOKENS,
            # Same window, same key: a final over a partial's window reuses its encoder output.
            cache_key=(self.session_id, utt.ordinal, start, end),
            stream_key=(self.session_id, utt.ordinal),
            speculative=speculative,
        )
        self._pending[rid] = _Pending(utt, kind, start, end, speculative)
        self._in_flight = rid
        self._requests.append(request)

    def _pump(self) -> None:
        """Ask for the most useful decode, if none of ours is in flight."""
        if self._in_flight is None:
            self._choose()
        self._maybe_done()

    def _choose(self) -> None:
        # 1. Finals of closed utterances, oldest first.
        while self._closed:
            utt = self._closed[0]
            assert utt.end is not None
            if utt.spec_result is not None and utt.spec_target == utt.end:
                self._closed.popleft()
                self._emit_final(utt, utt.spec_result)
                continue
            if utt.end <= utt.start:
                self._closed.popleft()
                self._resolve_empty(utt)
                continue
            self._request(utt, DecodeKind.FINAL, utt.end)
            return
        if self._open is None or self._stopping:
            return
        utt = self._open
        pos = self._segmenter.position
        pause_end = self._segmenter.pause_end
        if pause_end is not None and pause_end > utt.start:
            # 2. A pause. If the last partial's window already holds all the speech, the
            # speculative final decodes exactly that window (an encoder-cache hit); else the
            # window up to the pause. Either way it holds every voiced frame of the utterance.
            if utt.spec_requested:
                return
            speech_end = self._segmenter.speech_end or pause_end
            covered = speech_end + SPEC_MARGIN <= utt.last_partial_end <= pause_end
            if self.config.speculative_final:
                window = utt.last_partial_end if covered else pause_end
                utt.spec_end = window
                utt.spec_target = pause_end
                utt.spec_requested = True
                self._request(utt, DecodeKind.FINAL, window, speculative=True)
            elif self.config.partials and not covered:
                utt.last_partial_end = pause_end
                self._request(utt, DecodeKind.PARTIAL, pause_end)
            return
        # 3. Partials of the open utterance.
        if not self.config.partials:
            return
        hint = self.interval_hint_s or 0.0
        if math.isinf(hint):
            return  # partials paused
        # An utterance's first partial comes at the configured interval (the first words
        # shown soon); the engine's longer hint spaces the ones after it.
        first = utt.last_partial_end <= utt.start
        base = (
            self.config.partial_interval_s if first else max(self.config.partial_interval_s, hint)
        )
        interval = int(base * self._backoff * SAMPLE_RATE)
        # Near the max length no more partials: stable words then always lie before any
        # cut point the segmenter may choose, so the next utterance cannot repeat them.
        limit = utt.start + int(
            (self.config.max_utterance_s - self._segmenter.config.cut_search_s) * SAMPLE_RATE
        )
        if (
            pos - max(utt.last_partial_end, utt.start) >= interval
            and pos <= limit
            # Silence is starting: a pause (and the speculative final, which must not wait
            # behind a partial) may be near; speech coming back lifts this at once.
            and self._segmenter.silence_frames < HOLD_PARTIAL_FRAMES
        ):
            utt.last_partial_end = pos
            self._request(utt, DecodeKind.PARTIAL, pos)

    def _maybe_done(self) -> None:
        if (
            self._stopping
            and not self._done
            and self._in_flight is None
            and not self._closed
            and self._open is None
        ):
            self._done = True
            self._events.append(Done(self._fed, self._finals, self._stop_reason))

    # --- segmenter decisions -------------------------------------------------------------
    def _handle(self, decisions: list[object]) -> None:
        for d in decisions:
            if isinstance(d, SpeechStart):
                self._open = _Utterance(self._ordinals, d.start, last_partial_end=d.start)
                self._ordinals += 1
                if self.config.vad_events:
                    self._events.append(SpeechStarted(d.start))
            elif isinstance(d, Pause):
                pass  # _choose reads the pause state from the segmenter
            elif isinstance(d, Resume):
                if self._open is not None:
                    # Speech is back: whatever was speculated is void.
                    self._open.spec_end = None
                    self._open.spec_target = None
                    self._open.spec_requested = False
                    self._open.spec_result = None
            elif isinstance(d, SpeechEnd):
                utt = self._open
                if utt is None:
                    continue
                self._open = None
                utt.end = d.end
                utt.end_reason = d.reason
                utt.decided_at = self._segmenter.position
                if utt.spec_target != d.end:
                    utt.spec_result = None
                self._closed.append(utt)
                if self.config.vad_events:
                    self._events.append(SpeechStopped(utt.start, d.end, d.reason))

    def _keep_from(self) -> int:
        keep = self._segmenter.earliest_needed()
        if self._open is not None:
            keep = min(keep, self._open.start)
        if self._closed:
            keep = min(keep, self._closed[0].start)
        return keep

    def _trim(self) -> None:
        self._buf.trim(self._keep_from())

    # --- results -------------------------------------------------------------------------
    def _usable_text(self, result: DecodeResult) -> str:
        if result.no_speech_prob > NO_SPEECH_PROB and result.avg_logprob < NO_SPEECH_LOGPROB:
            return ""
        return result.text.strip()

    def _on_partial(self, pending: _Pending, result: DecodeResult) -> None:
        utt = pending.utterance
        if utt is not self._open:
            return  # the utterance closed meanwhile; its final supersedes this
        if self._backoff > 1.0:
            self._backoff = max(1.0, self._backoff / 2)
        self._show(utt, pending.end, self._usable_text(result))

    def _show(self, utt: _Utterance, end: int, text: str) -> None:
        """A new hypothesis of the open utterance: agreement, then a Partial if not empty."""
        if not text and not utt.agreement.stable_text:
            return
        hyp = utt.agreement.update(text)
        if not hyp.text:
            return
        if utt.number is None:
            utt.number = self._next_number
            self._next_number += 1
        utt.last_partial_text = hyp.text
        self._events.append(Partial(utt.number, utt.start, end, hyp.text, hyp.stable))

    def _on_final(self, pending: _Pending, result: DecodeResult) -> None:
        utt = pending.utterance
        if pending.speculative:
            if utt.spec_end != pending.end or not utt.spec_requested:
                return  # speech resumed: discarded
            if utt.end is None:
                utt.spec_result = result  # kept until the endpoint confirms it
                if self.config.partials:
                    # Show the whole utterance's text now: the final will start with it.
                    self._show(utt, pending.end, self._usable_text(result))
                return
            if self._closed and self._closed[0] is utt and utt.end == utt.spec_target:
                self._closed.popleft()
                self._emit_final(utt, result)
            return
        if self._closed and self._closed[0] is utt:
            self._closed.popleft()
            self._emit_final(utt, result)

    def _on_failure(self, pending: _Pending, message: str) -> None:
        utt = pending.utterance
        if pending.kind is DecodeKind.PARTIAL:
            return
        if pending.speculative and utt.end is None:
            # Do not speculate again in this pause (spec_requested stays set); the endpoint
            # asks for the real final.
            utt.spec_end = None
            return
        if not (self._closed and self._closed[0] is utt):
            return
        self._closed.popleft()
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

    def _emit_final(self, utt: _Utterance, result: DecodeResult) -> None:
        text = utt.agreement.finalize(self._usable_text(result))
        if not text:
            self._resolve_empty(utt)
            return
        words = self._final_words(utt, result, text) if self.config.word_timestamps else ()
        self._publish(utt, text, words, result.language or "en")

    def _publish(self, utt: _Utterance, text: str, words: tuple[Word, ...], language: str) -> None:
        assert utt.end is not None
        if utt.number is None:
            utt.number = self._next_number
            self._next_number += 1
        self._finals += 1
        if utt.decided_at is not None:
            self.endpoints[utt.number] = utt.decided_at
            if len(self.endpoints) > ENDPOINTS_KEPT:  # bounded: only recent finals are asked
                del self.endpoints[next(iter(self.endpoints))]
        self._prompt = f"{self._prompt} {text}".strip()[-PROMPT_CHARS:]
        self._events.append(
            Final(utt.number, utt.start, utt.end, text, words, language, utt.end_reason)
        )

    def _resolve_empty(self, utt: _Utterance) -> None:
        if self.config.vad_events:
            self._events.append(NoTranscript(utt.start))
        if utt.number is not None and utt.number == self._next_number - 1:
            self._next_number -= 1  # release it: no final was sent under this number

    def _final_words(self, utt: _Utterance, result: DecodeResult, text: str) -> tuple[Word, ...]:
        offset = utt.start / SAMPLE_RATE
        model = [
            Word(w.word, round(w.start + offset, 3), round(w.end + offset, 3), w.probability)
            for w in result.words
        ]
        stable = utt.agreement.stable_words
        shown = [w.word.strip() for w in model]
        agreed = normalized(shown[: len(stable)]) == normalized(stable)
        if agreed or not stable:
            return tuple(model)
        # The text was spliced to keep the stable words: time the forced words evenly over
        # the span before the model's continuation, with no claimed confidence.
        tail = model[utt.agreement.splice_offset(shown) :]
        lo = offset
        hi = tail[0].start if tail else (utt.end or utt.start) / SAMPLE_RATE
        step = max(hi - lo, 0.0) / len(stable)
        forced = [
            Word(w, round(lo + i * step, 3), round(lo + (i + 1) * step, 3), 0.0)
            for i, w in enumerate(stable)
        ]
        return tuple(forced + tail)


class _AudioBuffer:
    """The stream's recent audio, addressed by absolute sample position; amortised growth."""

    def __init__(self) -> None:
        self._data = np.zeros(SAMPLE_RATE, dtype=np.float32)
        self._len = 0
        self._start = 0  # absolute position of _data[0]

    def append(self, audio: np.ndarray) -> None:
        need = self._len + len(audio)
        if need > len(self._data):
            grown = np.zeros(max(need, 2 * len(self._data)), dtype=np.float32)
            grown[: self._len] = self._data[: self._len]
            self._data = grown
        self._data[self._len : need] = audio
        self._len = need

    def slice(self, start: int, end: int) -> np.ndarray:
        if start < self._start or end > self._start + self._len:
            raise AssertionError(f"audio [{start}, {end}) is no longer buffered")
        return self._data[start - self._start : end - self._start].copy()

    def trim(self, keep_from: int) -> None:
        drop = keep_from - self._start
        # Move data only once a good share is garbage, so trimming stays O(1) amortised.
        if drop > 0 and drop >= max(self._len // 2, 16 * FRAME_SAMPLES):
            self._data[: self._len - drop] = self._data[drop : self._len]
            self._len -= drop
            self._start = keep_from


def _as_mono_float32(samples: np.ndarray) -> np.ndarray:
    arr = np.asarray(samples)
    if arr.ndim != 1:
        raise AudioError(f"audio must be a 1-D array of mono samples, not shape {arr.shape}")
    if arr.dtype.kind not in "fiu":
        raise AudioError(f"audio must be numeric, not {arr.dtype}")
    out = arr.astype(np.float32, copy=False)
    if not np.all(np.isfinite(out)):
        out = np.nan_to_num(out, nan=0.0, posinf=1.0, neginf=-1.0)
    return out
