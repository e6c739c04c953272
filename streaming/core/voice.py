"""A coarse voice signature, to keep one voice's words out of another's context.

Context helps when the earlier audio sounds like the new utterance (the same speaker, room and
microphone); when the voice changes, the forced text of the other voice misleads the decoder
(tiny.en then rewrites the new speaker's first words to continue the old sentence). Two cues,
each cheap (pure numpy, a few ms per utterance):

- the long-term average spectrum: the mean log-mel of the louder half of the frames, its
  overall level removed (recording, microphone, vocal tract);
- the median pitch of the voiced frames (autocorrelation), which tells most changes of
  speaker between a low and a high voice.

``change`` is how far apart two signatures are, in units of the distance at which they count
as different voices: above 1, another voice. Measured on the eval clips: one reader's
utterances lie within 0.05-0.14 in spectrum and within 30 % in pitch; espeak-ng sentences of
one voice within 0.17 and 10 %.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from kettle.kernels.logmel import log_mel
from kettle.transcribe.types import SAMPLE_RATE

SIGNATURE_S = 3.0  # seconds of an utterance its signature is taken from (its start)
MIN_SIGNATURE_S = 1.0  # below this an utterance has no signature yet
SPECTRUM_UNIT = 0.17  # RMS difference of the mean log-mel spectra (Whisper's scale)
PITCH_UNIT = math.log(1.35)  # pitch ratio
PITCH_FRAME = 640  # 40 ms
PITCH_MIN_HZ, PITCH_MAX_HZ = 70, 400
VOICED_PEAK = 0.4  # autocorrelation peak, relative to the frame's energy, of a voiced frame
MIN_VOICED_FRAMES = 6


@dataclass(frozen=True)
class Voice:
    spectrum: np.ndarray
    pitch_hz: float | None


def signature(audio: np.ndarray) -> Voice | None:
    """The voice signature of up to SIGNATURE_S of speech, None if too short."""
    if len(audio) < MIN_SIGNATURE_S * SAMPLE_RATE:
        return None
    samples = np.ascontiguousarray(audio[: int(SIGNATURE_S * SAMPLE_RATE)], np.float32)
    mel = log_mel(samples)
    energy = mel.mean(axis=0)
    spectrum = mel[:, energy >= np.median(energy)].mean(axis=1)
    return Voice((spectrum - spectrum.mean()).astype(np.float32), pitch(samples))


def pitch(samples: np.ndarray) -> float | None:
    """Median pitch (Hz) of the louder voiced frames, None if too few are voiced."""
    frames = np.lib.stride_tricks.sliding_window_view(samples.astype(np.float64), PITCH_FRAME)
    frames = frames[:: PITCH_FRAME // 2]
    energy = (frames**2).mean(axis=1)
    frames = frames[energy > np.percentile(energy, 60)]
    frames = frames - frames.mean(axis=1, keepdims=True)
    spectrum = np.fft.rfft(frames * np.hanning(PITCH_FRAME), 4 * PITCH_FRAME)
    corr = np.fft.irfft(np.abs(spectrum) ** 2)[:, :PITCH_FRAME]
    low, high = SAMPLE_RATE // PITCH_MAX_HZ, SAMPLE_RATE // PITCH_MIN_HZ
    lag = low + np.argmax(corr[:, low:high], axis=1)
    voiced = corr[np.arange(len(corr)), lag] > VOICED_PEAK * corr[:, 0]
    if voiced.sum() < MIN_VOICED_FRAMES:
        return None
    return float(np.median(SAMPLE_RATE / lag[voiced]))


def change(a: Voice, b: Voice) -> float:
    """How different two voices are; above 1: not the same voice."""
    spectral = float(np.sqrt(np.mean((a.spectrum - b.spectrum) ** 2))) / SPECTRUM_UNIT
    if a.pitch_hz is None or b.pitch_hz is None:
        return spectral
    return max(spectral, abs(math.log(a.pitch_hz / b.pitch_hz)) / PITCH_UNIT)
