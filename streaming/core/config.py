"""A stream's settings (SessionConfig), the segmenter's and planner's configs from them, and
what a running stream may change (Session.reconfigure):

- ``language``, ``languages``, ``prompt`` and ``word_timestamps`` decode the utterances the
  VAD opens from then on (UtteranceSettings); the open one and those awaiting their finals
  keep what they opened with;
- ``keyterms`` go to every decode asked from then on; ``partials`` and the VAD's
  ``endpoint_silence_ms``, ``preroll_ms`` and ``vad_aggressiveness`` hold from the next
  frame (the open utterance's silence so far counts toward a new endpoint);
- every other field stays what the stream opened with.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kettle.streaming.core.planner import PlannerConfig
from kettle.streaming.core.tail import TailConfig
from kettle.streaming.core.utterances import UtteranceSettings
from kettle.streaming.core.vad import SegmenterConfig
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.model import defaults, keyterms
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, encoder_window_limit

NEXT_UTTERANCE = ("language", "languages", "prompt", "word_timestamps")
AT_ONCE = ("keyterms", "partials", "endpoint_silence_ms", "preroll_ms", "vad_aggressiveness")


@dataclass(frozen=True)
class SessionConfig:
    """How one stream is transcribed; validated on construction (ConfigError)."""

    language: str | None = None
    # With no ``language``: the codes detection may choose from (OpenAI's ``languages``).
    languages: tuple[str, ...] = ()
    partials: bool = True
    word_timestamps: bool = False
    # A second decode of each final with the audio after it (refine.py), which may send a
    # Revision; finals then always take word timestamps (the revision's words are taken
    # back by their times, and the final's word probabilities guard against churn).
    revisions: bool = False
    # Label each final (and revision) with its speaker (transcribe/speakers/clusters.py); the engine
    # needs a speaker encoder for it. ``max_speakers`` caps the speakers of this stream.
    diarize: bool = False
    max_speakers: int = 16
    partial_interval_s: float = 0.5
    endpoint_silence_ms: int = 500
    preroll_ms: int = 250
    onset_ms: int = 60
    max_utterance_s: float = 29.0
    vad_aggressiveness: int = 2
    speculative_final: bool = True
    # Silence after the last voiced frame at which the speculative final is asked for
    # (vad.SegmenterConfig.hush_ms; at most the 200 ms that make a pause).
    hush_ms: int = 60
    # Partials of an utterance this long wait while Silero hears no speech at the window's
    # end, so a speculative final never queues behind one (end_check.py); None: never.
    partial_end_check_s: float | None = 6.0
    # A long utterance's later decodes (partials and finals) start near its last stable words,
    # this many seconds before the window's end at least, the earlier stable words as prompt
    # (tail.py): a decode's cost grows with its window's tokens. None: every decode holds its
    # whole utterance.
    tail_window_s: float | None = 4.0
    # Text the first utterance is conditioned on (names, vocabulary); later ones get the
    # stream's previous finals.
    prompt: str | None = None
    # Names and terms expected in the audio (every API's keyterms; transcribe/model/keyterms.py):
    # every decode's hotwords. A stream may change them (Session.set_keyterms).
    keyterms: tuple[str, ...] = ()
    # Also emit SpeechStarted / SpeechStopped / NoTranscript / Finalized (protocols that
    # report the VAD or group utterances by the client's commits).
    vad_events: bool = False
    # Also emit Paused / Resumed (a protocol that decides turn ends itself: Deepgram Flux).
    pause_events: bool = False
    # Seconds of the stream before an utterance a decode may hold as context (at most what
    # fits in a 30 s window); 0 decodes every utterance alone. The context's text is bounded
    # too, in characters, for finals and for partials (see planner.PlannerConfig).
    context_s: float = 30.0
    context_chars: int = 250
    partial_context_chars: int = 120
    # Silence kept after the last voiced frame in a final's window (at most the endpoint's).
    final_tail_ms: int = 300
    # The last words of a partial never become stable (see agreement.py).
    stable_holdback: int = 1
    # A word becomes stable once this many successive partials agree on it (agreement.py),
    # and partials decode with this beam: a stable word is forced into the final, so it must
    # come from a good hypothesis although its window ends mid-speech. Two greedy partials
    # agreeing locked in mistakes a beam search avoids (RESULTS.md, "bench_accuracy_levers").
    stable_agree: int = 3
    # How many agree on the first stable words of a request's first utterance (None:
    # ``stable_agree``): Wyoming's first transcript-chunk comes a partial sooner (2, with no
    # loss at once on sets a-c; benchmarks/RESULTS.md, bench_wyoming).
    stable_agree_first: int | None = None
    # The highest no-speech probability of a hypothesis whose words may become stable (None:
    # the stream policy's unsure bar, 0.3, nonspeech.STREAM). Wyoming sets 0.5, the bar at
    # which a decode yields no text at all: its first chunk comes sooner on quiet or noisy
    # speech (FLEURS partials read 0.3-0.5), at 0.2 WER points on set c at once (RESULTS.md,
    # rejected experiments), which the protocols that show stable words as hints do not pay.
    stable_max_no_speech: float | None = None
    partial_beam_size: int = 3
    # A final's beam. A final in context steps through its forced context one token at a
    # time (CTranslate2 forces prefix tokens as decoder steps), and a beam search step costs
    # about twice a greedy one: with 41 tokens of context, 640 ms to generate at beam 5, 525
    # at 2, 304 greedy. Greedy finals cut the final lag (P50 0.43 vs 0.45 s, P95 0.52 vs
    # 0.81 s) but cost set a 1.6 WER points and single clips (set c) 2.4, over offline + 1
    # (RESULTS.md, "bench_accuracy_levers", session 11): so 5.
    final_beam_size: int = defaults.BEAM_SIZE
    # Context stops where the voice changes: at an earlier final whose voice differs from the
    # utterance's by more than this (voice.change: 1 is the measured boundary); 0: no gate.
    voice_gate: float = 1.1
    # The encoder runs on at least this many seconds (the window and a second of silence
    # if longer), not on 30 s: its cost grows with its input, and most of a stream's windows
    # are a few seconds long. 30: every window on 30 s, as Whisper was trained
    # (transcribe.types.encoder_frames). For partials and for finals apart. A final's
    # encoder pass on 30 s was a third of its decode time and most of what put its lag
    # behind the per-utterance path's; 15 s lost no accuracy (RESULTS.md,
    # "bench_accuracy_levers", session 12). Partials on 5 s and finals on 10 s (issue 28) cut
    # a stream's CPU by 5-20 % against 10 s and 15 s at the same WER on sets a-c (RESULTS.md,
    # "bench_accuracy_encode").
    partial_encode_s: float = 5.0
    final_encode_s: float = 10.0
    # The model is multilingual (the engine sets it): with no ``language`` it detects each
    # window's language, and then no context is used, since the earlier utterances would
    # decide the language.
    multilingual: bool = False

    def encode_min_s(self, kind: DecodeKind) -> float | None:
        """A request's ``encode_min_s`` for this kind: None (Whisper's 30 s) from 30 s on."""
        seconds = self.final_encode_s if kind is DecodeKind.FINAL else self.partial_encode_s
        return seconds if seconds < 30 else None

    def tail_config(self) -> TailConfig | None:
        return None if self.tail_window_s is None else TailConfig(min_s=self.tail_window_s)

    def __post_init__(self) -> None:
        if self.language is not None and not (
            isinstance(self.language, str)
            and 2 <= len(self.language) <= 3
            and self.language.isalpha()
        ):
            raise ConfigError(f"language must be an ISO 639-1 code or None, not {self.language!r}")
        for code in self.languages:
            if not (isinstance(code, str) and 2 <= len(code) <= 3 and code.isalpha()):
                raise ConfigError(f"languages must hold ISO 639-1 codes, not {code!r}")
        if not 0.1 <= self.partial_interval_s <= 10.0:
            raise ConfigError(
                f"partial_interval_s must be within 0.1..10, not {self.partial_interval_s}"
            )
        if not 0.0 <= self.context_s <= 30.0:
            raise ConfigError(f"context_s must be within 0..30, not {self.context_s}")
        if not (0 <= self.context_chars <= 400 and 0 <= self.partial_context_chars <= 400):
            raise ConfigError("context_chars and partial_context_chars must be within 0..400")
        if self.tail_window_s is not None and not 1.0 <= self.tail_window_s <= 30.0:
            raise ConfigError(
                f"tail_window_s must be within 1..30 or None, not {self.tail_window_s}"
            )
        if self.partial_end_check_s is not None and not 0.0 <= self.partial_end_check_s <= 30.0:
            raise ConfigError(
                f"partial_end_check_s must be within 0..30 or None, not {self.partial_end_check_s}"
            )
        if not 0 <= self.final_tail_ms <= 2000:
            raise ConfigError(f"final_tail_ms must be within 0..2000, not {self.final_tail_ms}")
        if not 0.0 <= self.voice_gate <= 10.0:
            raise ConfigError(f"voice_gate must be within 0..10, not {self.voice_gate}")
        for name in ("partial_encode_s", "final_encode_s"):
            if not 0.0 <= getattr(self, name) <= 30.0:
                raise ConfigError(f"{name} must be within 0..30, not {getattr(self, name)}")
        if not 1 <= self.final_beam_size <= 10:
            raise ConfigError(f"final_beam_size must be within 1..10, not {self.final_beam_size}")
        if not 1 <= self.partial_beam_size <= 10:
            raise ConfigError(
                f"partial_beam_size must be within 1..10, not {self.partial_beam_size}"
            )
        if not 2 <= self.stable_agree <= 10:
            raise ConfigError(f"stable_agree must be within 2..10, not {self.stable_agree}")
        if self.stable_agree_first is not None and not 2 <= self.stable_agree_first <= 10:
            raise ConfigError("stable_agree_first must be within 2..10 or None")
        if self.stable_max_no_speech is not None and not 0.0 <= self.stable_max_no_speech <= 1.0:
            raise ConfigError("stable_max_no_speech must be within 0..1 or None")
        if not 0 <= self.stable_holdback <= 10:
            raise ConfigError(f"stable_holdback must be within 0..10, not {self.stable_holdback}")
        if not 1 <= self.max_speakers <= 16:
            raise ConfigError(f"max_speakers must be within 1..16, not {self.max_speakers}")
        if self.keyterms != keyterms.normalize(self.keyterms):
            raise ConfigError("keyterms must be normalized (transcribe.keyterms.normalize)")
        self.segmenter_config()  # validates the VAD fields

    def segmenter_config(self) -> SegmenterConfig:
        return SegmenterConfig(
            aggressiveness=self.vad_aggressiveness,
            onset_ms=self.onset_ms,
            endpoint_silence_ms=self.endpoint_silence_ms,
            preroll_ms=self.preroll_ms,
            max_utterance_s=self.max_utterance_s,
            cut_search_s=min(SegmenterConfig.cut_search_s, self.max_utterance_s / 2),
            tail_ms=min(SegmenterConfig.tail_ms, self.endpoint_silence_ms),
            hush_ms=self.hush_ms,
        )

    @property
    def context(self) -> bool:
        """Decodes hold earlier finals as context (see ``multilingual``)."""
        return self.context_s > 0 and (self.language is not None or not self.multilingual)

    def utterance_settings(self, prompt_from: int = 0, context_from: int = 0) -> UtteranceSettings:
        """What an utterance opened now is decoded with; ``prompt_from``: where the prompt
        was set (finals before it are not part of the prompt); ``context_from``: where its
        request began (finals before it are neither context nor prompt)."""
        return UtteranceSettings(
            language=self.language,
            languages=self.languages,
            context_language=(self.language or "en") if self.context else None,
            prompt=self.prompt or "",
            prompt_from=prompt_from,
            context_from=context_from,
            word_timestamps=self.word_timestamps,
        )

    def changed_to(self, new: SessionConfig) -> SessionConfig:
        """This config with the fields a running stream may change taken from ``new`` (the
        module docstring says which); ConfigError if they are out of range."""
        return dataclasses.replace(self, **{f: getattr(new, f) for f in NEXT_UTTERANCE + AT_ONCE})

    def planner_config(self) -> PlannerConfig:
        seg = self.segmenter_config()
        # The final's tail is silence the endpoint waited for anyway, so a final never waits
        # for audio past its endpoint; and it never holds less than the utterance.
        tail_ms = max(seg.tail_ms, min(self.final_tail_ms, self.endpoint_silence_ms))
        context = self.context
        return PlannerConfig(
            partials=self.partials,
            speculative_final=self.speculative_final,
            partial_interval=int(self.partial_interval_s * SAMPLE_RATE),
            final_tail=tail_ms * SAMPLE_RATE // 1000,
            # Near the max length no more partials: stable words then always lie before any
            # cut point the segmenter may choose, so the next utterance cannot repeat them.
            partial_limit=int((self.max_utterance_s - seg.cut_search_s) * SAMPLE_RATE),
            final_context_chars=self.context_chars,
            partial_context_chars=self.partial_context_chars,
            max_voice_change=(self.voice_gate or None) if context else None,
            partial_window=encoder_window_limit(self.encode_min_s(DecodeKind.PARTIAL)),
            tail=self.tail_config(),
        )
