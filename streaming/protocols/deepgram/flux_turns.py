"""Deepgram Flux's turns: which of kettle's utterances make the open turn, and when it starts,
updates, is eager, resumes and ends (flux.py's docstring gives Flux's rules). Engine events
and the audio clock come in; ``TurnInfo`` messages (through ``FluxWriter``) and the Finalize
that ends a turn's open utterance go out. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kettle.streaming.core.events import (
    Event,
    Final,
    NoTranscript,
    Partial,
    Paused,
    Resumed,
    SpeechStarted,
    SpeechStopped,
)
from kettle.streaming.protocols.base import Action, Finalize, Send
from kettle.streaming.protocols.deepgram.flux_eot import (
    MIN_END_SILENCE_MS,
    SPEAKING,
    confidence,
    ends_sentence,
    same_words,
)
from kettle.streaming.protocols.deepgram.flux_messages import (
    FluxWriter,
    TurnInfo,
    flux_word,
    spread_words,
)
from kettle.streaming.protocols.deepgram.flux_wire import Thresholds
from kettle.transcribe.types import SAMPLE_RATE, Word

UPDATE_EVERY_S = 0.25  # Flux: an Update for about every 0.25 s of audio
_UPDATE_SAMPLES = int(UPDATE_EVERY_S * SAMPLE_RATE)


@dataclass
class FluxStats:
    """What one connection's turns did, to measure how often an eager end is withdrawn."""

    turns: int = 0
    eager: int = 0  # EagerEndOfTurn sent
    resumed_by_speech: int = 0  # ... withdrawn because speech came back
    resumed_by_revision: int = 0  # ... withdrawn because the final read other words
    ends: dict[str, int] = field(default_factory=dict)  # EndOfTurn per trigger

    @property
    def resumed(self) -> int:
        return self.resumed_by_speech + self.resumed_by_revision


@dataclass
class Turn:
    start: int  # 16 kHz sample: its first utterance's start
    finals: list[tuple[str, tuple[Word, ...]]] = field(default_factory=list)
    current: str = ""  # the open utterance's latest text (partial or speculative)
    speculative: bool = False  # ``current`` is the pause's speculative final
    agrees: bool = False  # ... and reads as the partial before it
    heard: int = 0  # 16 kHz sample: the end of the audio its texts cover
    final_end: int = 0  # 16 kHz sample: the end of its last final (0: none yet)
    eager: str | None = None  # the EagerEndOfTurn transcript, while it stands
    last_info: int = 0  # audio position of its last TurnInfo

    def transcript(self) -> str:
        texts = [text for text, _ in self.finals] + ([self.current] if self.current else [])
        return " ".join(t.strip() for t in texts if t.strip())

    def words(self) -> list[dict[str, Any]]:
        """Its words so far: the finals' own (spread where a final has none), then the open
        utterance's spread over the audio after the last final."""
        words: list[dict[str, Any]] = []
        for text, ws in self.finals:
            words += [
                flux_word(w.word, w.start, w.end, w.probability) for w in ws if w.word.strip()
            ]
            if not ws:
                words += spread_words(text, self.start, self.heard)
        if self.current:
            words += spread_words(self.current, self.final_end or self.start, self.heard)
        return words


@dataclass
class Ending:
    """An end of turn asked for: it is sent once the utterances in ``waiting`` resolve."""

    trigger: str
    confidence: float
    waiting: set[int]


class TurnTracker:
    """One connection's turn state. ``clock`` is the audio received so far, in 16 kHz samples;
    ``thresholds`` may change at any time (Configure)."""

    def __init__(
        self, writer: FluxWriter, thresholds: Thresholds, clock: Callable[[], int]
    ) -> None:
        self.thresholds = thresholds
        self.stats = FluxStats()
        self._writer = writer
        self._clock = clock
        self._turn: Turn | None = None
        self._turn_index = 0
        self._unresolved: set[int] = set()  # utterances started, no Final/NoTranscript yet
        self._speech_end: int | None = None  # while paused: the last voiced frame's end
        self._last_partial = ""  # the open utterance's last plain partial
        self._ending: Ending | None = None
        self._held: list[Event] = []  # later utterances' events while a turn ends

    # -- the stream's utterances ---------------------------------------------------------

    def on_event(self, event: Event) -> list[Action]:
        """An event of the stream's utterances (Error and Done are the codec's)."""
        start = _utterance_of(event)
        ending = self._ending
        if ending is not None and start is not None and start not in ending.waiting:
            self._held.append(event)  # a later utterance: the next turn's
            return []
        if isinstance(event, SpeechStarted):
            self._unresolved.add(event.start)
            self._speech_end, self._last_partial = None, ""
            return []
        if isinstance(event, Paused):
            self._speech_end = event.speech_end
            return self.tick()
        if isinstance(event, Resumed):
            return self._on_resumed()
        if isinstance(event, Partial):
            return self._on_partial(event)
        if isinstance(event, Final):
            return self._on_resolved(event.start, event.end, event.text, event.words)
        if isinstance(event, NoTranscript):
            return self._on_resolved(event.start, None, "", ())
        if isinstance(event, SpeechStopped) and event.reason == "max_length":
            self._speech_end = None  # cut mid-speech: the next utterance goes straight on
        return []  # SpeechStopped, Finalized: the turn reads them from the finals

    def _on_resumed(self) -> list[Action]:
        self._speech_end = None
        turn = self._turn
        if turn is None:
            return []
        turn.speculative = turn.agrees = False
        if turn.eager is None:
            return []
        self.stats.resumed_by_speech += 1
        return [self._resume(turn)]

    def _on_partial(self, event: Partial) -> list[Action]:
        out: list[Action] = []
        turn = self._turn
        if turn is None:
            turn = self._turn = Turn(start=event.start, last_info=self._clock())
            turn.current, turn.heard = event.text, event.end
            out.append(self._info("StartOfTurn", turn, self._confidence()))
        else:
            if not event.speculative and turn.eager is not None:
                # Speech came back (partials hold while a pause lasts).
                self.stats.resumed_by_speech += 1
                out.append(self._resume(turn))
            turn.current, turn.heard = event.text, max(turn.heard, event.end)
            if not event.speculative:
                turn.speculative = turn.agrees = False
            out.append(self._info("Update", turn, self._confidence()))
        if event.speculative:
            turn.speculative = True
            turn.agrees = bool(self._last_partial) and same_words(self._last_partial, event.text)
        else:
            self._last_partial = event.text
        return [*out, *self.tick()]

    def _on_resolved(
        self, start: int, end: int | None, text: str, words: tuple[Word, ...]
    ) -> list[Action]:
        """An utterance got its Final (``end`` set) or NoTranscript."""
        self._unresolved.discard(start)
        self._last_partial = ""
        if not self._unresolved and self._speech_end is None and end is not None:
            self._speech_end = end  # (cut or finalized mid-speech) silent since, until speech
        out: list[Action] = []
        turn = self._turn
        if text.strip():
            if turn is None:
                turn = self._turn = Turn(start=start, last_info=self._clock())
                turn.current, turn.heard = text, end or start
                out.append(self._info("StartOfTurn", turn, self._confidence()))
            turn.finals.append((text, words))
            turn.current, turn.speculative = "", False
            turn.heard = turn.final_end = max(turn.heard, end or start)
        elif turn is not None and not turn.finals:
            turn.current = ""  # the model heard no words after all
        ending = self._ending
        if ending is not None:
            ending.waiting.discard(start)
            if not ending.waiting:
                out += self._end_turn(ending.trigger, ending.confidence)
        return [*out, *self.tick()]

    # -- turn decisions ------------------------------------------------------------------

    def _silence_ms(self) -> float | None:
        if self._speech_end is None:
            return None
        return (self._clock() - self._speech_end) * 1000 / SAMPLE_RATE

    def _confidence(self) -> float:
        silence = self._silence_ms()
        turn = self._turn
        if silence is None or turn is None:
            return SPEAKING
        text = turn.current or turn.transcript()
        return confidence(silence, closing=ends_sentence(text), agrees=turn.agrees)

    def tick(self) -> list[Action]:
        """The audio clock moved or a cue changed: eager, end of turn, or a periodic Update."""
        turn = self._turn
        if turn is None or self._ending is not None:
            return []
        silence = self._silence_ms()
        if silence is None:
            if turn.eager is None and self._clock() - turn.last_info >= _UPDATE_SAMPLES:
                return [self._info("Update", turn, self._confidence())]
            return []
        conf = self._confidence()
        th = self.thresholds
        out: list[Action] = []
        eager = th.eager_eot_threshold
        if eager is not None and turn.eager is None and turn.speculative and conf >= eager:
            transcript = turn.transcript()
            if transcript:
                turn.eager = transcript
                self.stats.eager += 1
                out.append(self._info("EagerEndOfTurn", turn, conf))
        if silence >= th.eot_timeout_ms:
            return [*out, *self._request_end("timeout", conf)]
        if th.eot_threshold < 1.0 and silence >= MIN_END_SILENCE_MS and conf >= th.eot_threshold:
            return [*out, *self._request_end("model", conf)]
        if turn.eager is None and self._clock() - turn.last_info >= _UPDATE_SAMPLES:
            out.append(self._info("Update", turn, self._confidence()))
        return out

    def force_end(self) -> list[Action]:
        """ForceEndTurn: with no text yet, what is open is finalized (its text, if any, starts
        and ends a turn)."""
        return self._request_end("manual", self._confidence(), turn_needed=False)

    def close(self) -> list[Action]:
        """The stream is done (every utterance resolved): the turns still open end."""
        out: list[Action] = []
        if self._ending is not None:
            out += self._end_turn(self._ending.trigger, self._ending.confidence)
        if self._turn is not None:
            out += self._end_turn("close", self._confidence())
        return out

    def _request_end(self, trigger: str, conf: float, *, turn_needed: bool = True) -> list[Action]:
        if self._ending is not None or (turn_needed and self._turn is None):
            return []
        if not self._unresolved:
            return self._end_turn(trigger, conf) if self._turn is not None else []
        self._ending = Ending(trigger, conf, set(self._unresolved))
        return [Finalize()]

    def _end_turn(self, trigger: str, conf: float) -> list[Action]:
        turn, self._turn, self._ending = self._turn, None, None
        out: list[Action] = []
        if turn is not None:
            transcript = turn.transcript()
            if turn.eager is not None and transcript != turn.eager:
                if same_words(transcript, turn.eager):
                    transcript = turn.eager  # the same words: the eager text stands
                else:
                    self.stats.resumed_by_revision += 1
                    out.append(self._resume(turn))
            turn.current = ""
            words = [w for _, ws in turn.finals for w in ws]
            shown = (
                [_shown(w) for w in words if w.word.strip()]
                if words
                else spread_words(transcript, turn.start, turn.heard)
            )
            self.stats.turns += 1
            self.stats.ends[trigger] = self.stats.ends.get(trigger, 0) + 1
            end_conf = max(conf, SPEAKING)
            out.append(self._say("EndOfTurn", turn, transcript, shown, end_conf, trigger))
            self._turn_index += 1
        held, self._held = self._held, []
        for event in held:
            out += self.on_event(event)
        return out

    # -- messages ------------------------------------------------------------------------

    def _resume(self, turn: Turn) -> Send:
        turn.eager = None
        return self._info("TurnResumed", turn, self._confidence())

    def _info(self, event: str, turn: Turn, conf: float) -> Send:
        transcript = turn.eager if event == "EagerEndOfTurn" and turn.eager else turn.transcript()
        return self._say(event, turn, transcript, turn.words(), conf)

    def _say(
        self,
        event: str,
        turn: Turn,
        transcript: str,
        words: list[dict[str, Any]],
        conf: float,
        trigger: str | None = None,
    ) -> Send:
        turn.last_info = self._clock()
        end = max(turn.heard, turn.start)
        info = TurnInfo(event, self._turn_index, turn.start, end, transcript, words, conf, trigger)
        return self._writer.turn_info(info)


def _shown(word: Word) -> dict[str, Any]:
    """A final's word as Flux shows it: the model's times and probability."""
    return flux_word(word.word, word.start, word.end, word.probability)


def _utterance_of(event: Event) -> int | None:
    """The utterance (its start) an event is about; None for stream-wide ones."""
    if isinstance(
        event, (Partial, Final, SpeechStarted, SpeechStopped, NoTranscript, Paused, Resumed)
    ):
        return event.start
    return None


__all__ = ["UPDATE_EVERY_S", "FluxStats", "Turn", "TurnTracker"]
