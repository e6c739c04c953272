"""Holding a long utterance's partial while its speech may be ending.

One request of a session is in flight at a time, so a partial that starts as the speech ends
delays the speculative final by its whole cost, and a long utterance's partial costs as much
as a final (bench_ttfs trace, issue 40: 13 s utterances' partials started 0.1 s after the
speech's end took 0.32-0.35 s, and their finals waited for them: time to final 0.85-0.97 s
against 0.3-0.5 s without). webrtcvad keeps hearing voice in the breath and decay after the
last word, so the segmenter's silence starts late; Silero VAD hears the end sooner.

Before such a partial goes out, Silero reads the window's last ``LOOK_SAMPLES`` afresh; if
none of its last ``TAIL_CHUNKS`` chunks is speech, the partial waits (the session asks again
with the next audio), for at most ``MAX_HOLD_SAMPLES``. Inside speech that happens in the
gaps between words and costs the partial a few frames; after the last word it leaves the
model free for the final. Only the partial's timing changes: segmentation, finals and their
windows do not. On bench_ttfs's turns (Silero's speech end as the truth, every 40 ms), the
check held 18 % of the positions inside speech and 91 % of those 40-300 ms after it; a
256 ms look held 28 % inside speech.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from kettle.streaming.core.audio_buffer import AudioBuffer
from kettle.streaming.core.planner import Plan
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind

CHUNK_SAMPLES = 512  # Silero's chunk at 16 kHz (32 ms)
LOOK_SAMPLES = 16 * CHUNK_SAMPLES  # 512 ms: Silero, started afresh, settles on speech by then
TAIL_CHUNKS = 2  # the last 64 ms
SPEECH_PROBABILITY = 0.5  # Silero's own speech threshold
MAX_HOLD_SAMPLES = 4800  # 0.3 s

# Audio (a multiple of CHUNK_SAMPLES) -> speech probability per chunk.
SpeechProbe = Callable[[np.ndarray], np.ndarray]


def silero_probe(audio: np.ndarray) -> np.ndarray:
    """faster-whisper's Silero VAD (ONNX, one thread; loaded on first use, once per process)."""
    from kettle.transcribe.model import fw

    return np.asarray(fw.get_vad_model()(audio)).reshape(-1)


@dataclass
class EndCheck:
    min_samples: int  # partials of utterances shorter than this are never held
    probe: SpeechProbe
    # A partial waits at most this long (then goes anyway): Silero may miss quiet or odd
    # speech that webrtcvad hears, and such a stream still gets its partials.
    max_hold: int = MAX_HOLD_SAMPLES
    _held_from: int | None = field(default=None, init=False)  # where the wait began
    _checked_at: int = field(default=0, init=False)  # the window end Silero last read

    @classmethod
    def of(cls, seconds: float | None, probe: SpeechProbe | None = None) -> EndCheck | None:
        """The check for ``SessionConfig.partial_end_check_s`` (None: no check); Silero by
        default, loaded when a long partial first asks."""
        if seconds is None:
            return None
        return cls(int(seconds * SAMPLE_RATE), probe or silero_probe)

    def holds(self, plan: Plan, buf: AudioBuffer) -> bool:
        """Whether ``plan``, a long utterance's partial whose audio ends with no speech, waits."""
        if plan.kind is not DecodeKind.PARTIAL:
            self._held_from = None
            return False
        if self._held_from is not None and plan.end - self._checked_at < CHUNK_SAMPLES:
            ended = True  # waiting: Silero reads the new audio a chunk at a time
        else:
            ended = self.speech_ended(plan.end - plan.utterance.start, plan.end, buf)
            self._checked_at = plan.end
        if not ended:
            self._held_from = None
            return False
        if self._held_from is None:
            self._held_from = plan.end
        if plan.end - self._held_from >= self.max_hold:
            self._held_from = None
            return False
        return True

    def speech_ended(self, length: int, end: int, buf: AudioBuffer) -> bool:
        """Whether an utterance ``length`` samples long so far is long enough to check and
        Silero hears no speech in its last ``TAIL_CHUNKS`` before ``end``."""
        if length < max(self.min_samples, LOOK_SAMPLES):
            return False
        probabilities = self.probe(buf.slice(end - LOOK_SAMPLES, end))
        return bool(np.max(probabilities[-TAIL_CHUNKS:]) < SPEECH_PROBABILITY)


def speech_after(
    buf: AudioBuffer,
    start: int,
    end: int,
    probe: SpeechProbe,
    *,
    threshold: float = SPEECH_PROBABILITY,
    min_chunks: int = 1,
) -> bool:
    """Whether Silero hears speech in [``start``, ``end``): ``min_chunks`` chunks there at
    ``threshold`` or above (all of them where fewer fit, two at least), read after
    ``LOOK_SAMPLES`` before ``start`` (Silero, started afresh, settles by then)."""
    chunks = (end - start) // CHUNK_SAMPLES
    if chunks < min(min_chunks, 2):
        return False
    begin = max(0, end - chunks * CHUNK_SAMPLES - LOOK_SAMPLES)
    begin = end - (end - begin) // CHUNK_SAMPLES * CHUNK_SAMPLES
    probabilities = probe(buf.slice(begin, end))[-chunks:]
    return int(np.count_nonzero(probabilities >= threshold)) >= min(min_chunks, chunks)
