"""What a session keeps of who speaks (pure): each utterance's voice signature (context stops
at a final in another voice, ``voice.py``) and, with diarize, the audio the engine's speaker
labeler embeds."""

from __future__ import annotations

import numpy as np
from kettle.streaming.core import voice
from kettle.streaming.core.audio_buffer import AudioBuffer
from kettle.streaming.core.utterances import Utterance, UtteranceTracker
from kettle.transcribe.types import SAMPLE_RATE

VOICE_STEP = SAMPLE_RATE // 2  # samples of new audio between an open utterance's signatures


class Speakers:
    def __init__(self, buf: AudioBuffer, *, diarize: bool) -> None:
        self._buf = buf
        self._diarize = diarize
        # With diarize: each published final's audio, until the engine's labeler takes it,
        # and each closed utterance's (start, audio), so its embedding starts at once.
        self._speech: dict[int, np.ndarray] = {}
        self._closed_speech: list[tuple[int, np.ndarray]] = []

    def closed(self, utt: Utterance) -> None:
        """``utt`` closed: with diarize, its audio is embedded before its final comes."""
        if self._diarize and utt.end is not None and utt.end > utt.start:
            self._closed_speech.append((utt.start, self._buf.slice(utt.start, utt.end)))

    def published(self, number: int, utt: Utterance) -> None:
        """Final ``number`` is out: with diarize, its audio waits for the labeler."""
        assert utt.end is not None
        if self._diarize:
            self._speech[number] = self._buf.slice(utt.start, utt.end)

    def take_speech(self, number: int) -> np.ndarray | None:
        return self._speech.pop(number, None)

    def take_closed_speech(self) -> list[tuple[int, np.ndarray]]:
        closed, self._closed_speech = self._closed_speech, []
        return closed

    def update_voice(self, utts: UtteranceTracker, position: int) -> None:
        """Voice signatures of the utterances a plan may be for: the closed one at the head
        of the queue, else the open one (over its first seconds, once it has them)."""
        utt = utts.closed[0] if utts.closed else utts.open
        if utt is None or utt.voice_final:
            return
        end = utt.end if utt.end is not None else position
        end = min(end, utt.start + int(voice.SIGNATURE_S * SAMPLE_RATE))
        final = utt.end is not None or end - utt.start >= voice.SIGNATURE_S * SAMPLE_RATE
        # The session pumps on every chunk: an open utterance's signature is taken again
        # only every VOICE_STEP of new audio (a few times per utterance), not per chunk.
        if not final and end - utt.voice_end < VOICE_STEP:
            return
        utt.voice = voice.signature(self._buf.slice(utt.start, end))
        utt.voice_end, utt.voice_final = end, final
