"""A speculative final: decoded at a pause, used if the endpoint confirms that pause.

When silence follows speech, the utterance will end where that pause began unless speech
comes back. The session decodes the final's window then, so the final is ready (or nearly)
when the endpoint is decided. Anything that makes the speculation void (speech resumes, the
request is dropped, the utterance ends elsewhere) calls ``invalidate()``.

The pause begins before the final's window has all arrived (the window keeps more silence
after the last voiced frame than makes a pause). Rather than wait for the rest, the
speculation can fill it with the pause's own audio (``fill_tail``): the endpoint later
confirms that what really came there was silence too, and a window that ends in room tone
reads as one that ends in room tone; zeros would read as a cut (tiny.en misreads words at a
window's hard edge).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from kettle.transcribe.types import DecodeResult


def fill_tail(window: np.ndarray, silence: int, missing: int) -> np.ndarray:
    """``window`` extended by ``missing`` samples mirrored from its last ``silence`` samples
    (the pause heard so far), reflected back and forth if the pause is the shorter."""
    if missing <= 0:
        return window
    quiet = window[window.shape[0] - min(max(silence, 0), window.shape[0]) :]
    if quiet.shape[0] < 2:  # nothing to mirror: fall back to the window's last sample
        pad = np.full(missing, window[-1] if window.shape[0] else 0.0, dtype=window.dtype)
    else:
        pad = np.pad(quiet, (0, missing), mode="reflect")[quiet.shape[0] :]
    return np.concatenate([window, pad.astype(window.dtype, copy=False)])


@dataclass
class Speculation:
    window_end: int | None = None  # end of the speculated final's window
    target: int | None = None  # the utterance end (its endpoint's) it is for
    speech_end: int | None = None  # the last voiced frame's end when it was asked for
    result: DecodeResult | None = None
    # Set when a speculation of this pause failed: no second try, the endpoint asks for the
    # real final instead.
    given_up: bool = False

    @property
    def requested(self) -> bool:
        return self.window_end is not None or self.given_up

    def request(self, window_end: int, target: int, speech_end: int) -> None:
        self.window_end, self.target, self.speech_end = window_end, target, speech_end
        self.result = None

    def is_for(self, window_end: int) -> bool:
        """Whether the speculation of a window ending at ``window_end`` still stands (not
        voided, nor asked again since)."""
        return self.window_end == window_end

    def accept(self, window_end: int, result: DecodeResult) -> bool:
        """Keep a speculative result if it is for the current speculation."""
        if not self.is_for(window_end):
            return False  # voided meanwhile
        self.result = result
        return True

    def fail(self) -> None:
        self.invalidate()
        self.given_up = True

    def matches(self, end: int, speech_end: int) -> bool:
        """Whether an utterance that ended at ``end``, its last voiced frame ending at
        ``speech_end``, is the one speculated: the same speech, ended anywhere in the silence
        up to the endpoint (a finalize in the hush ends it early). The window's audio past
        the speech was silence either way (heard, or filled from what was heard)."""
        return (
            self.target is not None
            and self.speech_end == speech_end
            and speech_end <= end <= self.target
        )

    def ready(self, end: int, speech_end: int) -> DecodeResult | None:
        """The result, if it was speculated for this utterance (``matches``)."""
        return self.result if self.matches(end, speech_end) else None

    def invalidate(self) -> None:
        self.window_end = self.target = self.speech_end = None
        self.result = None
        self.given_up = False
