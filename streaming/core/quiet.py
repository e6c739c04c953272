"""Silero VAD's end of speech, followed chunk by chunk: a second, sooner trigger for the
speculative final.

The speculative final is asked for at webrtcvad's hush (``SessionConfig.hush_ms`` after its
last voiced frame). webrtcvad keeps hearing voice in the breath, decay and room noise after
the last word, so on some turns its hush comes late and the final is decoded only after the
client's Finalize or commit. On bench_ttfs's 34 turns, webrtcvad's hush came 60 ms after
the speech's end (Silero's, read whole) at the median, 510 ms at P90 and 790 ms at worst.
Silero run as a stream (its LSTM state carried from chunk to chunk, 0.1 ms a chunk) has
``QUIET_CHUNKS`` chunks below 0.5 44 ms after the end at the median, 96 ms at P90 and 108 ms
at worst; inside speech it fires 0.30 times per speech second (webrtcvad's hush: 0.45).

The session asks for the speculative final at whichever comes first. A speculation from
Silero's end covers the speech up to that end and the final's tail after it (the part not
heard yet filled from what was heard, as at webrtcvad's hush); it is void once Silero hears
speech again, or if the utterance is still open ``HOLD_SAMPLES`` later (partials wait while
it stands). The final then uses it however late webrtcvad ends the utterance: what lies
between is audio Silero heard as no speech.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from kettle.transcribe.types import SAMPLE_RATE

CHUNK_SAMPLES = 512  # Silero's chunk at 16 kHz (32 ms)
CONTEXT_SAMPLES = 64  # the samples before a chunk Silero reads with it
SPEECH_PROBABILITY = 0.5  # Silero's own speech threshold
QUIET_CHUNKS = 3  # 96 ms below it after speech: the speech has ended
# A Silero end that webrtcvad has not turned into an utterance end this long after it is
# dropped and partials go on (webrtcvad lagged up to 0.8 s, and its endpoint waits 0.5 s).
HOLD_SAMPLES = int(1.5 * SAMPLE_RATE)

# One CHUNK_SAMPLES chunk -> its speech probability; stateful (it hears the chunks in order).
ChunkProbe = Callable[[np.ndarray], float]


class SileroStream:
    """faster-whisper's Silero VAD (ONNX, one thread, loaded once per process) with this
    stream's own LSTM state and context."""

    def __init__(self) -> None:
        from kettle.transcribe.model import fw

        self._session = fw.get_vad_model().session
        self._h = np.zeros((1, 1, 128), np.float32)
        self._c = np.zeros((1, 1, 128), np.float32)
        self._context = np.zeros(CONTEXT_SAMPLES, np.float32)

    def __call__(self, chunk: np.ndarray) -> float:
        x = np.concatenate([self._context, chunk]).astype(np.float32, copy=False)[None, :]
        out, self._h, self._c = self._session.run(None, {"input": x, "h": self._h, "c": self._c})
        self._context = chunk[-CONTEXT_SAMPLES:]
        return float(np.asarray(out).reshape(-1)[0])


@dataclass
class QuietTracker:
    """Where the speech heard so far ended, once ``chunks`` quiet chunks follow it."""

    chunks: int
    probe: ChunkProbe
    speech_end: int | None = None  # the end of the last chunk heard as speech
    quiet: int = 0  # chunks below the threshold since then
    _read: int = 0  # samples read
    _rest: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

    @classmethod
    def of(cls, chunks: int | None, probe: ChunkProbe | None = None) -> QuietTracker | None:
        """The tracker for ``SessionConfig.quiet_chunks`` (None: none); Silero by default."""
        if chunks is None:
            return None
        return cls(chunks, probe or SileroStream())

    def feed(self, audio: np.ndarray) -> None:
        buf = np.concatenate([self._rest, audio]) if self._rest.shape[0] else audio
        whole = buf.shape[0] // CHUNK_SAMPLES
        for i in range(whole):
            probability = self.probe(buf[i * CHUNK_SAMPLES : (i + 1) * CHUNK_SAMPLES])
            self._read += CHUNK_SAMPLES
            if probability >= SPEECH_PROBABILITY:
                self.speech_end, self.quiet = self._read, 0
            else:
                self.quiet += 1
        self._rest = buf[whole * CHUNK_SAMPLES :].copy()

    def ended(self, since: int) -> int | None:
        """The end of speech heard after ``since``, once it is followed by ``chunks`` quiet
        chunks; None while speech goes on or when none was heard."""
        if self.speech_end is None or self.speech_end <= since or self.quiet < self.chunks:
            return None
        return self.speech_end

    def spoke_after(self, position: int) -> bool:
        return self.speech_end is not None and self.speech_end > position
