"""Voice-activity segmenter: cuts a stream of 16 kHz audio into utterances.

webrtcvad classifies fixed 20 ms frames (aligned to the stream's sample 0, so the result does
not depend on how the audio was chunked); a second opinion (frame energy and spectral
flatness) rejects noise that webrtcvad calls speech, e.g. white or fan noise, whose spectrum is
flat where voiced speech is peaky. On top of the per-frame decisions sits hysteresis:

- onset after ``onset_ms`` of consecutive voiced frames; the utterance starts ``preroll_ms``
  before the first of them (never before the previous utterance's end, so nothing is doubled);
- a *pause* when ``tail_ms`` of silence follow speech (the session may start a speculative
  final then), *resume* when speech comes back before the endpoint;
- an *endpoint* after ``endpoint_silence_ms`` of silence; the utterance ends ``tail_ms`` after
  its last voiced frame;
- a maximum length: the utterance is cut at the quietest frame (lowest energy) of the last
  ``cut_search_s`` before the limit and the remainder opens the next utterance at once.

Positions are absolute sample counts on the stream's clock. The segmenter is pure: no clock,
no I/O; it is fed audio and returns what it decided.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.types import SAMPLE_RATE

logger = logging.getLogger(__name__)

FRAME_MS = 20
FRAME_SAMPLES = SAMPLE_RATE * FRAME_MS // 1000

# A frame is "voiced" only if webrtcvad says so and it also passes this gate. Spectral
# flatness (geometric / arithmetic mean of the power spectrum) is ~0.5 for white noise at any
# level and ~0.01-0.1 for voiced speech; onset needs several consecutive voiced frames, so the
# flatter fricatives inside words do not matter.
MAX_FLATNESS = 0.40
# Absolute floor: quieter frames are never speech (-75 dBFS; real microphones and the quiet
# FLEURS recordings sit well above it, at -60..-40 dBFS for speech).
MIN_RMS = 10 ** (-75 / 20)
# Level adaptation. webrtcvad is level-sensitive: speech recorded at -60 dBFS is mostly called
# silence. So frames are scaled towards TARGET_RMS by a gain that follows the stream's recent
# peak level (a peak follower that decays with a ~2 s time constant), capped at MAX_GAIN and
# never below 1 (loud recordings are not attenuated). A frame also needs MIN_SNR over the
# noise floor, tracked as a minimum follower that rises slowly (~3 dB/s), so steady noise
# amplified by the gain is not taken for speech.
TARGET_RMS = 10 ** (-26 / 20)
MAX_GAIN = 10 ** (50 / 20)
PEAK_DECAY = 0.99  # per 20 ms frame
FLOOR_RISE = 10 ** (3 / 20 / 50)  # per 20 ms frame
INITIAL_FLOOR = 10 ** (-60 / 20)
MIN_SNR = 10 ** (9 / 20)

FrameClassifier = Callable[[np.ndarray], bool]


def spectral_flatness(frame: np.ndarray) -> float:
    power = np.abs(np.fft.rfft(frame * np.hanning(len(frame)))) ** 2 + 1e-12
    return float(np.exp(np.mean(np.log(power))) / np.mean(power))


def frame_rms(frame: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(frame, dtype=np.float64))))


class WebrtcClassifier:
    """webrtcvad on level-normalised frames plus the SNR/flatness second opinion.

    Stateful (level and noise-floor followers), so one instance per stream, fed every frame in
    order; frames are aligned to the stream's sample 0, so decisions do not depend on chunking.
    """

    def __init__(self, aggressiveness: int = 2) -> None:
        import webrtcvad

        # Two detectors, because webrtcvad adapts internally to what it is fed: one sees the
        # frames as they are (so normal-level audio is judged exactly as plain webrtcvad would
        # judge it), the other sees them level-normalised (so quiet recordings are heard too).
        self._vad = webrtcvad.Vad(aggressiveness)
        self._vad_scaled = webrtcvad.Vad(aggressiveness)
        self._peak = 0.0
        self._floor: float | None = None

    def set_aggressiveness(self, aggressiveness: int) -> None:
        """webrtcvad's mode from the next frame on (the level followers carry on)."""
        self._vad.set_mode(aggressiveness)
        self._vad_scaled.set_mode(aggressiveness)

    def __call__(self, frame: np.ndarray) -> bool:
        rms = frame_rms(frame)
        self._peak = max(rms, self._peak * PEAK_DECAY)
        self._floor = (
            min(rms, INITIAL_FLOOR) if self._floor is None else min(rms, self._floor * FLOOR_RISE)
        )
        gain = min(MAX_GAIN, max(1.0, TARGET_RMS / max(self._peak, 1e-9)))
        plain = _is_speech(self._vad, frame)
        scaled = _is_speech(self._vad_scaled, frame * gain)  # both fed every frame
        if not (plain or scaled):
            return False
        if rms < MIN_RMS or rms < self._floor * MIN_SNR:
            return False
        return spectral_flatness(frame) <= MAX_FLATNESS


def _is_speech(vad: Any, frame: np.ndarray) -> bool:
    pcm = (np.clip(frame, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
    return bool(vad.is_speech(pcm, SAMPLE_RATE))


@dataclass(frozen=True)
class SegmenterConfig:
    aggressiveness: int = 2
    onset_ms: int = 60
    endpoint_silence_ms: int = 500
    preroll_ms: int = 250
    max_utterance_s: float = 29.0
    cut_search_s: float = 3.0
    # Silence kept after the last voiced frame, and the silence that makes a pause.
    tail_ms: int = 200
    # Silence after which the utterance is likely to end (``hush_end``): the speculative
    # final is asked for then, before the pause (at most tail_ms; tail_ms: at the pause).
    hush_ms: int = 200

    def __post_init__(self) -> None:
        if self.aggressiveness not in (0, 1, 2, 3):
            raise ConfigError(f"vad aggressiveness must be 0..3, not {self.aggressiveness}")
        if not FRAME_MS <= self.onset_ms <= 2000:
            raise ConfigError(f"onset_ms must be within {FRAME_MS}..2000, not {self.onset_ms}")
        if not 2 * FRAME_MS <= self.endpoint_silence_ms <= 10000:
            raise ConfigError(
                f"endpoint_silence_ms must be within {2 * FRAME_MS}..10000, "
                f"not {self.endpoint_silence_ms}"
            )
        if not 0 <= self.preroll_ms <= 2000:
            raise ConfigError(f"preroll_ms must be within 0..2000, not {self.preroll_ms}")
        if not 2.0 <= self.max_utterance_s <= 29.5:
            raise ConfigError(f"max_utterance_s must be within 2..29.5, not {self.max_utterance_s}")
        if not 0.0 < self.cut_search_s < self.max_utterance_s:
            raise ConfigError("cut_search_s must be positive and below max_utterance_s")
        if not 0 <= self.tail_ms <= self.endpoint_silence_ms:
            raise ConfigError("tail_ms must be within 0..endpoint_silence_ms")
        if not FRAME_MS <= self.hush_ms <= 2000:
            raise ConfigError(f"hush_ms must be within {FRAME_MS}..2000, not {self.hush_ms}")

    @property
    def onset_frames(self) -> int:
        return max(1, round(self.onset_ms / FRAME_MS))

    @property
    def endpoint_frames(self) -> int:
        return max(1, round(self.endpoint_silence_ms / FRAME_MS))

    @property
    def preroll_frames(self) -> int:
        return round(self.preroll_ms / FRAME_MS)

    @property
    def tail_frames(self) -> int:
        return min(round(self.tail_ms / FRAME_MS), self.endpoint_frames)

    @property
    def hush_frames(self) -> int:
        return max(1, min(round(self.hush_ms / FRAME_MS), self.tail_frames))

    @property
    def max_frames(self) -> int:
        return int(self.max_utterance_s * 1000 / FRAME_MS)

    @property
    def cut_search_frames(self) -> int:
        return max(1, int(self.cut_search_s * 1000 / FRAME_MS))


@dataclass(frozen=True)
class SpeechStart:
    start: int


@dataclass(frozen=True)
class Pause:
    """Silence since ``end``-tail; if no speech comes back the utterance will end at ``end``."""

    end: int


@dataclass(frozen=True)
class Resume:
    pass


@dataclass(frozen=True)
class SpeechEnd:
    """reason: endpoint, max_length, finalize or stop. ``speech_end``: the end of the last
    voiced frame at or before ``end``; the audio from there to ``silent_until`` (at least
    ``end``) is known to be silence (after an endpoint or in a pause: all of it so far)."""

    end: int
    reason: str
    speech_end: int = field(default=0, compare=False)
    silent_until: int = field(default=0, compare=False)


SegmentEvent = SpeechStart | Pause | Resume | SpeechEnd


class Segmenter:
    """Frames, classifies and segments; returns decisions as SegmentEvents in stream order."""

    def __init__(
        self, config: SegmenterConfig | None = None, classifier: FrameClassifier | None = None
    ) -> None:
        self.config = config or SegmenterConfig()
        self._classify = classifier or WebrtcClassifier(self.config.aggressiveness)
        self._pending = np.zeros(0, dtype=np.float32)  # samples not yet a whole frame
        self._frame = 0  # index of the next frame to classify
        self._energies: list[float] = []  # per frame, from frame _energy_base on
        self._energy_base = 0
        self._prev_end = 0  # end (samples) of the previous utterance
        self._voiced_run = 0
        # Open utterance state.
        self._open = False
        self._start = 0
        self._last_voiced_end = 0
        self._silence = 0  # consecutive unvoiced frames
        self._resume_run = 0  # consecutive voiced frames during a pause
        self._paused = False
        self._stopped = False

    # --- queries -----------------------------------------------------------------------
    @property
    def position(self) -> int:
        """Samples classified so far (whole frames)."""
        return self._frame * FRAME_SAMPLES

    @property
    def in_utterance(self) -> bool:
        return self._open

    @property
    def utterance_start(self) -> int | None:
        return self._start if self._open else None

    @property
    def paused(self) -> bool:
        return self._open and self._paused

    @property
    def silence_frames(self) -> int:
        """Consecutive unvoiced frames in the open utterance (0 outside one)."""
        return self._silence if self._open else 0

    @property
    def speech_end(self) -> int | None:
        """End of the open utterance's last voiced frame."""
        return self._last_voiced_end if self._open else None

    @property
    def hush_end(self) -> int | None:
        """Where the open utterance ends if no speech comes back, once ``hush_ms`` of silence
        followed its last voiced frame (None before): its endpoint's end, maybe not heard yet."""
        if not self._open or (not self._paused and self._silence < self.config.hush_frames):
            return None
        return self._last_voiced_end + self.config.tail_frames * FRAME_SAMPLES

    def earliest_needed(self) -> int:
        """The earliest sample a future utterance may still start at (for buffer trimming)."""
        if self._open:
            return self._start
        back = (self.config.preroll_frames + self._voiced_run + 1) * FRAME_SAMPLES
        return max(self._prev_end, self.position - back, 0)

    # --- input -------------------------------------------------------------------------
    def reconfigure(self, config: SegmenterConfig) -> None:
        """Settings from the next frame on (an open utterance's silence so far counts). A
        longer pre-roll never reaches back past what the old one kept: the session's buffer
        holds no more than ``earliest_needed``."""
        if not self._open:
            self._prev_end = max(self._prev_end, self.earliest_needed())
        self.config = config
        level = getattr(self._classify, "set_aggressiveness", None)
        if level is not None:  # a classifier with levels (webrtcvad's)
            level(config.aggressiveness)

    def feed(self, samples: np.ndarray) -> list[SegmentEvent]:
        if self._stopped:
            return []
        events: list[SegmentEvent] = []
        data = np.concatenate([self._pending, samples]) if len(self._pending) else samples
        whole = len(data) // FRAME_SAMPLES * FRAME_SAMPLES
        for off in range(0, whole, FRAME_SAMPLES):
            self._step(data[off : off + FRAME_SAMPLES], events)
        self._pending = np.array(data[whole:], dtype=np.float32)
        return events

    def finalize(self) -> list[SegmentEvent]:
        """End the open utterance now (at the audio classified so far)."""
        if not self._open or self._stopped:
            return []
        end = self._end_after_speech() if self._paused else self.position
        return [self._close(end, "finalize", self.position if self._paused else end)]

    def stop(self) -> list[SegmentEvent]:
        """No more audio: close the open utterance, counting a trailing partial frame."""
        if self._stopped:
            return []
        self._stopped = True
        if not self._open:
            return []
        end = self._end_after_speech() if self._paused else self.position + len(self._pending)
        return [self._close(end, "stop", self.position if self._paused else end)]

    # --- internals ---------------------------------------------------------------------
    def _end_after_speech(self) -> int:
        return min(self._last_voiced_end + self.config.tail_frames * FRAME_SAMPLES, self.position)

    def _close(self, end: int, reason: str, silent_until: int | None = None) -> SpeechEnd:
        self._open = False
        self._paused = False
        self._prev_end = end
        self._voiced_run = 0
        self._silence = 0
        last_voiced = min(self._last_voiced_end, end)
        return SpeechEnd(end, reason, last_voiced, max(end, silent_until or end))

    def _step(self, frame: np.ndarray, events: list[SegmentEvent]) -> None:
        cfg = self.config
        idx = self._frame
        self._frame += 1
        self._energies.append(float(np.mean(np.square(frame, dtype=np.float64))))
        voiced = bool(self._classify(frame))
        frame_end = self._frame * FRAME_SAMPLES
        if not self._open:
            self._voiced_run = self._voiced_run + 1 if voiced else 0
            if self._voiced_run >= cfg.onset_frames:
                first = idx - self._voiced_run + 1
                start = max((first - cfg.preroll_frames) * FRAME_SAMPLES, self._prev_end, 0)
                self._open = True
                self._start = start
                self._last_voiced_end = frame_end
                self._silence = 0
                self._paused = False
                events.append(SpeechStart(start))
            self._trim_energies()
            return
        if voiced:
            if self._paused:
                # A blip inside a pause does not resume; onset_frames voiced frames do.
                self._resume_run += 1
                if self._resume_run >= cfg.onset_frames:
                    self._paused = False
                    self._silence = 0
                    self._resume_run = 0
                    self._last_voiced_end = frame_end
                    events.append(Resume())
            else:
                if self._silence >= cfg.hush_frames:
                    events.append(Resume())  # speech is back before the pause: hush over
                self._silence = 0
                self._last_voiced_end = frame_end
        else:
            self._resume_run = 0
            self._silence += 1
            if not self._paused and self._silence >= cfg.tail_frames:
                self._paused = True
                events.append(Pause(self._end_after_speech()))
            if self._silence >= cfg.endpoint_frames:
                events.append(self._close(self._end_after_speech(), "endpoint", frame_end))
                self._trim_energies()
                return
        if (frame_end - self._start) // FRAME_SAMPLES >= cfg.max_frames:
            cut = self._quietest_cut(frame_end)
            events.append(self._close(cut, "max_length"))
            # The remainder opens the next utterance at once, with no pre-roll overlap.
            self._open = True
            self._start = cut
            self._paused = False
            self._silence = 0
            self._last_voiced_end = max(self._last_voiced_end, cut)
            events.append(SpeechStart(cut))
        self._trim_energies()

    def _quietest_cut(self, frame_end: int) -> int:
        cfg = self.config
        last = frame_end // FRAME_SAMPLES  # exclusive frame index
        first_allowed = self._start // FRAME_SAMPLES + cfg.max_frames // 2
        lo = max(last - cfg.cut_search_frames, first_allowed)
        window = self._energies[lo - self._energy_base : last - self._energy_base]
        if not window:
            return frame_end
        # Cut at the start of the quietest frame (the latest one on ties keeps more context).
        arr = np.asarray(window)
        best = int(len(arr) - 1 - np.argmin(arr[::-1]))
        cut = (lo + best) * FRAME_SAMPLES
        return cut if cut > self._start else frame_end

    def _trim_energies(self) -> None:
        keep_from = self.earliest_needed() // FRAME_SAMPLES
        drop = keep_from - self._energy_base
        if drop > 256:
            del self._energies[:drop]
            self._energy_base = keep_from


class EnergyClassifier:
    """Voiced when the frame RMS reaches a threshold: a deterministic classifier for tests
    and for audio known to be clean."""

    def __init__(self, threshold: float = 0.01) -> None:
        self.threshold = threshold

    def __call__(self, frame: np.ndarray) -> bool:
        return frame_rms(frame) >= self.threshold
