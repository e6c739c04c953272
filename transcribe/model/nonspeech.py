"""What Whisper says over sound that is not speech, and when a decode counts as none.

One policy class, applied in one place for streams (``streaming/core/results.py``,
``usable``) and one for files (``decoding.suppressed``, at the decoder's configured
thresholds). The two instances differ where each was tuned on its own evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from kettle.transcribe.words import normalize_word


def phrase_words(text: str) -> list[str]:
    """The one normalizer: a text's words as docs/protocol.md compares them, empty ones dropped."""
    return [w for w in (normalize_word(t) for t in text.split()) if w]


@dataclass(frozen=True)
class NonSpeechPolicy:
    """A decode yields no text when the model says no speech (``no_speech_prob``), doubts
    both speech and its words (``unsure_prob`` and ``unsure_logprob``: Whisper's rule), or
    says one of ``phrases`` (or, with ``repeats``, one phrase word over and over) while its
    no-speech probability is above ``phrase_prob``. A None threshold disables its rule."""

    phrases: frozenset[str]
    phrase_prob: float | None
    repeats: bool
    unsure_prob: float | None
    unsure_logprob: float | None
    no_speech_prob: float | None = None

    def unsure(self, no_speech_prob: float, avg_logprob: float) -> bool:
        """Whether the model doubted both that it heard speech and what the words were."""
        if self.unsure_prob is None or self.unsure_logprob is None:
            return False
        return no_speech_prob > self.unsure_prob and avg_logprob < self.unsure_logprob

    def sure_of_speech(self, no_speech_prob: float, bar: float | None = None) -> bool:
        """Whether the no-speech probability is at or under ``bar`` (None: the unsure bar)."""
        bar = self.unsure_prob if bar is None else bar
        return bar is None or no_speech_prob <= bar

    def is_phrase(self, text: str, no_speech_prob: float) -> bool:
        """Whether a decode is one of the phrases, and the model was unsure it heard speech."""
        if self.phrase_prob is None or no_speech_prob <= self.phrase_prob:
            return False
        words = phrase_words(text)
        if " ".join(words) in self.phrases:
            return True
        return (
            self.repeats
            and len(words) > 1
            and all(w == words[0] for w in words)
            and words[0] in self.phrases
        )

    def drops(self, text: str, no_speech_prob: float, avg_logprob: float) -> bool:
        """Whether a decode yields no text."""
        if self.no_speech_prob is not None and no_speech_prob > self.no_speech_prob:
            return True
        return self.unsure(no_speech_prob, avg_logprob) or self.is_phrase(text, no_speech_prob)


# Streams. Phrases common at the end of the subtitled videos Whisper learnt from, which
# tiny.en produces on babble, music and tones with no speech in them, sometimes with a
# no-speech probability under no_speech_prob (the one noise final left after that rule,
# RESULTS.md "bench_accuracy_levers", was "Thank you so much.").
# no_speech_prob 0.5: on tones and reversed-speech babble the VAD passes, tiny.en says "Beep
# Beep" or "You're welcome" at 0.51-0.91 with a mean log-probability near -0.2, so Whisper's
# own rule (above 0.6 and below -1.0, FILES below) kept them; the finals of 47 real-speech
# clips stayed at or below 0.28.
# phrase_prob 0.2: real speech that says a phrase alone rarely leaves the model unsure: the
# finals of the 47 real-speech clips had a median no-speech probability of 0.05.
# unsure 0.3 / -1.0: on reversed-speech babble tiny.en said "Yeah, it's not a good idea, it's
# a good idea." at 0.47 and -1.22, under Whisper's 0.6; of the 68 finals of set (c)'s 47
# real-speech clips none had both more than 0.3 and less than -1.0 (the most no-speech: 0.40
# at -0.67; the lowest log-probability: -0.98 at 0.02).
STREAM = NonSpeechPolicy(
    phrases=frozenset(
        {
            "thank you",
            "thank you so much",
            "thank you very much",
            "thanks for watching",
            "thank you for watching",
            "thank you for watching please subscribe",
            "please subscribe",
            "you",
            "bye",
            "bye bye",
            "you're welcome",
            "i'll talk to you later",
            "i'll see you next time",
            "see you next time",
            "yeah yeah",
            "beep",
        }
    ),
    phrase_prob=0.2,
    repeats=True,
    unsure_prob=0.3,
    unsure_logprob=-1.0,
    no_speech_prob=0.5,
)

# Whisper's own no-speech rule: above this no-speech probability and below this mean log-prob.
WHISPER_NO_SPEECH_PROB = 0.6
WHISPER_LOGPROB = -1.0

# Files: faster-whisper's (and OpenAI Whisper's) thresholds, the defaults of
# AdapterConfig.no_speech_threshold / log_prob_threshold, which also drive the temperature
# fallback; a phrase is dropped only above the same no-speech threshold (a real "Thank you."
# scores low there). They differ from STREAM's: files decode whole 30 s windows, not tiny.en
# on VAD-cut utterances, and were not tuned on the stream benchmark.
FILES = NonSpeechPolicy(
    phrases=frozenset(
        {
            "you",
            "thank you",
            "thank you very much",
            "thanks for watching",
            "thank you for watching",
            "thanks for listening",
            "please subscribe",
            "bye",
            "oh",
            "so",
            "um",
            "hmm",
            "the end",
            "i'm sorry",
        }
    ),
    phrase_prob=WHISPER_NO_SPEECH_PROB,
    repeats=False,
    unsure_prob=WHISPER_NO_SPEECH_PROB,
    unsure_logprob=WHISPER_LOGPROB,
)
