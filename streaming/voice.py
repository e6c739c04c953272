"""A coarse voice signature, to keep one voice's words out of another's context.

Context helps when the earlier audio sounds like the new utterance (the same speaker, room and
microphone); when the voice changes, the forced text of the other voice misleads the decoder
(tiny.en then rewrites the new speaker's first words to continue the old sentence). The
signature is the long-term average spectrum: the mean log-mel of the louder half of the
frames, its overall level removed. Two utterances of one recording differ by about 0.05-0.13
(RMS, Whisper's log-mel scale); different recordings mostly by more (measured on the eval
clips in ``benchmarks/bench_accuracy.py``'s notes). Pure numpy, a few ms per utterance.
"""

from __future__ import annotations

import numpy as np
from kettle.kernels.logmel import log_mel
from kettle.transcribe.types import SAMPLE_RATE

SIGNATURE_S = 3.0  # seconds of an utterance its signature is taken from (its start)
MIN_SIGNATURE_S = 1.0  # below this an utterance has no signature yet


def signature(audio: np.ndarray) -> np.ndarray | None:
    """The voice signature of up to SIGNATURE_S of speech, None if too short."""
    if len(audio) < MIN_SIGNATURE_S * SAMPLE_RATE:
        return None
    mel = log_mel(np.ascontiguousarray(audio[: int(SIGNATURE_S * SAMPLE_RATE)], np.float32))
    energy = mel.mean(axis=0)
    loud = mel[:, energy >= np.median(energy)]
    spectrum = loud.mean(axis=1)
    return (spectrum - spectrum.mean()).astype(np.float32)


def distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((a - b) ** 2)))
