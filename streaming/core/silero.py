"""Silero VAD run as a stream: the speech probability of the audio heard so far.

faster-whisper ships Silero VAD (ONNX) for its file pipeline; its model takes 32 ms windows
(512 samples at 16 kHz) with the 64 samples before each window as context, and carries an
LSTM state (``h``, ``c``) from window to window. This feeds it the stream window by window, so
a probability is known 32 ms after the audio, whatever size the chunks arrived in.

The segmenter uses it as a veto on short endpoints (``vad.Segmenter``): webrtcvad calls
breath, lip noise, reverberation and hum speech, which held an utterance open for up to a
second after its last word; Silero below ``SILENCE_BELOW`` says that is not speech.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

WINDOW = 512
CONTEXT = 64
# Silero's own rule (get_speech_timestamps): speech from 0.5, its end below 0.5 - 0.15.
SPEECH_FROM = 0.5
SILENCE_BELOW = 0.35


@functools.lru_cache(maxsize=1)
def _session() -> Any:
    from faster_whisper.vad import get_vad_model

    return get_vad_model().session  # thread-safe; one per process


class SileroStream:
    """The latest window's speech probability (0 before the first whole window, when it is
    neither sure nor silent)."""

    def __init__(self, session: Any | None = None) -> None:
        self._session = session if session is not None else _session()
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)
        self.probability = 0.0
        self._windows = 0

    def feed(self, samples: np.ndarray) -> float:
        """Add 16 kHz float32 audio; the probability of the last whole window heard."""
        data = np.concatenate([self._pending, samples.astype(np.float32, copy=False)])
        whole = len(data) // WINDOW * WINDOW
        for off in range(0, whole, WINDOW):
            window = data[off : off + WINDOW]
            batch = np.concatenate([self._context, window])[None, :]
            out, self._h, self._c = self._session.run(
                None, {"input": batch, "h": self._h, "c": self._c}
            )
            self._context = window[-CONTEXT:]
            self.probability = float(np.asarray(out).reshape(-1)[0])
            self._windows += 1
        self._pending = data[whole:]
        return self.probability

    def sure(self) -> bool:
        """Whether the latest window is speech by Silero's own threshold."""
        return self._windows > 0 and self.probability >= SPEECH_FROM

    def silent(self) -> bool:
        """Whether Silero, having heard a window, says the latest one is not speech."""
        return self._windows > 0 and self.probability < SILENCE_BELOW


def speech_veto(decoder: object) -> SileroStream | None:
    """A stream's veto for this decoder: none for one that reads synthetic tones as words
    (the fake model; Silero rightly calls tones no speech)."""
    return None if getattr(decoder, "reads_tones", False) else SileroStream()
