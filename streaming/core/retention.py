"""What audio and history a session still needs, and letting go of the rest (pure).

The buffer keeps audio from the earliest of: what the VAD may still look back at (pre-roll,
a cut's search), the oldest utterance without its final, a refinement still to come, and the
span of finals later windows take as context. Only the first two are *undecoded*: context and
refinements re-read audio that already has its final.
"""

from __future__ import annotations

from kettle.streaming.core.audio_buffer import AudioBuffer
from kettle.streaming.core.context import ContextHistory
from kettle.streaming.core.refine_lane import RefineLane
from kettle.streaming.core.utterances import UtteranceTracker
from kettle.streaming.core.vad import Segmenter


def undecoded_start(segmenter: Segmenter, utts: UtteranceTracker) -> int:
    """The earliest sample a live decode still to come may need."""
    keep = segmenter.earliest_needed()
    oldest = utts.oldest_unresolved()
    if oldest is not None:
        keep = min(keep, oldest.start)
    return keep


def trim(
    buf: AudioBuffer,
    history: ContextHistory,
    segmenter: Segmenter,
    utts: UtteranceTracker,
    refine: RefineLane | None,
) -> None:
    """Drop the audio and finals no decode will read again."""
    keep = undecoded_start(segmenter, utts)
    refining = refine.earliest_needed() if refine is not None else None
    if refining is not None:
        keep = min(keep, refining)
    history.forget_before(keep)
    context = history.earliest_needed()
    if context is not None:
        keep = min(keep, context)
    buf.trim(keep)
