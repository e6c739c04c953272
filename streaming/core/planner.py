"""The decode planner: which request a session asks for next, on which window, with which
context and prefix. Pure: it reads the session's state and returns a plan, or None.

Windows. A decode covers its utterance from its start plus, before it, as much of the
stream's already-final audio as fits (``ContextHistory``): the text of that span is forced
as the decoder's prefix and only the new words come back. After the last voiced frame a
final's window keeps ``final_tail`` of the silence that ended the utterance (tiny.en is
fragile at a window's edge: a tight cut turns words into others).

Order. Finals of closed utterances come first, oldest first. Then, in an open utterance:

- at a pause long enough for the final's tail, a speculative FINAL on the window the final
  will have if the endpoint confirms the pause (ready, or nearly, when the endpoint comes),
  as soon as the pause begins, the tail not heard yet filled from the pause's own audio;
- else, every ``partial_interval`` of new audio, a PARTIAL on the utterance so far, unless
  silence is starting (a pause, and its speculative final, may be near) or the utterance is
  near its maximum length (stable words must lie before any cut the segmenter may choose).
"""

from __future__ import annotations

from dataclasses import dataclass

from kettle.streaming.core.context import PROMPT_CHARS, Context, ContextHistory
from kettle.streaming.core.tail import TailConfig, choose_cut, lead_text
from kettle.streaming.core.utterances import Utterance, UtteranceTracker
from kettle.transcribe.types import MAX_WINDOW_SAMPLES, DecodeKind, Purpose, Word

HOLD_PARTIAL_FRAMES = 6  # 120 ms of silence and partials wait for the pause


@dataclass(frozen=True)
class PlannerConfig:
    partials: bool
    speculative_final: bool
    partial_interval: int  # samples
    final_tail: int  # samples of silence after the last voiced frame in a final's window
    partial_limit: int  # samples into an utterance after which no partial is asked for
    # Context text per request. The decoder steps through forced tokens one by one (about
    # as costly as generating them), so partials, asked for twice a second, get less.
    final_context_chars: int
    partial_context_chars: int
    # Context stops at a final whose voice differs from the utterance's by more than this
    # (voice.change); None: no voice gate.
    max_voice_change: float | None = None
    # The engine's longer cadence for an utterance's partials after its first (the first
    # words are shown soon; the cost-based hint spaces the rest).
    later_partial_interval: int | None = None
    # A partial's window, context included, is at most this long: its encoder runs on at
    # least that much audio anyway (SessionConfig.partial_encode_s), so context up to there
    # costs no encoder time.
    partial_window: int = MAX_WINDOW_SAMPLES
    # Tail windows for long utterances (tail.py); None: every decode holds its utterance.
    tail: TailConfig | None = None


@dataclass(frozen=True)
class StreamState:
    """What the planner reads of the stream: the segmenter's view and the overload backoff."""

    position: int  # samples classified
    fed: int  # samples received (buffered)
    hush_end: int | None  # where the open utterance ends if no speech comes back (a hush)
    speech_end: int | None  # end of the open utterance's last voiced frame
    silence_frames: int
    backoff: float
    stopping: bool


@dataclass(frozen=True)
class Plan:
    utterance: Utterance
    kind: DecodeKind
    start: int  # window start (context included)
    end: int  # window end
    context: Context
    prefix: str  # the utterance's stable words, which the result starts with
    speculative: bool = False
    # Where the heard audio ends when a speculative final's window runs past it (the rest
    # is filled from the pause; always before ``end``); None: the whole window was heard.
    heard_end: int | None = None
    # The stable words before a tail window (tail.py), absolute seconds: its result is made
    # whole with them; () when the window holds the whole utterance.
    lead: tuple[Word, ...] = ()

    @property
    def heard_until(self) -> int:
        """The end of the audio the window holds that was heard (a partial shown from it
        never claims audio that has not arrived)."""
        return self.end if self.heard_end is None else self.heard_end

    @property
    def purpose(self) -> Purpose:
        """What its request is for (``DecodeRequest.purpose``)."""
        return Purpose.SPECULATIVE if self.speculative else Purpose.of_kind(self.kind)


def final_window_end(utt: Utterance) -> int:
    """The end of a closed utterance's final window."""
    assert utt.end is not None
    return max(utt.end, utt.window_limit if utt.window_limit is not None else utt.end)


def plan_final(
    utt: Utterance, history: ContextHistory, cfg: PlannerConfig, *, speculative: bool = False
) -> Plan:
    end = final_window_end(utt)
    return _plan(utt, DecodeKind.FINAL, end, history, cfg, speculative=speculative)


def plan_next(
    tracker: UtteranceTracker, history: ContextHistory, state: StreamState, cfg: PlannerConfig
) -> Plan | None:
    """The next request, given that none of the session's is in flight and every closed
    utterance at the head of the queue needs a decode."""
    if tracker.closed:
        return plan_final(tracker.closed[0], history, cfg)
    utt = tracker.open
    if utt is None or state.stopping:
        return None
    if state.hush_end is not None and state.hush_end > utt.start:
        return _plan_pause(utt, history, state, cfg)
    if not cfg.partials:
        return None
    first = utt.last_partial_end <= utt.start
    base = cfg.partial_interval
    if not first and cfg.later_partial_interval is not None:
        base = max(base, cfg.later_partial_interval)
    interval = int(base * state.backoff)
    if (
        state.position - max(utt.last_partial_end, utt.start) >= interval
        and state.position - utt.start <= cfg.partial_limit
        and state.silence_frames < HOLD_PARTIAL_FRAMES
    ):
        return _plan(utt, DecodeKind.PARTIAL, state.position, history, cfg)
    return None


def _plan_pause(
    utt: Utterance, history: ContextHistory, state: StreamState, cfg: PlannerConfig
) -> Plan | None:
    assert state.hush_end is not None
    spec = utt.speculation
    if not cfg.speculative_final or spec.requested:
        return None
    speech_end = state.speech_end if state.speech_end is not None else state.hush_end
    window_end = max(state.hush_end, speech_end + cfg.final_tail)
    heard_end = None
    if state.position < window_end:
        heard_end = state.position  # the rest of the tail is filled from the pause
    return _plan(
        utt, DecodeKind.FINAL, window_end, history, cfg, speculative=True, heard_end=heard_end
    )


def _plan(
    utt: Utterance,
    kind: DecodeKind,
    end: int,
    history: ContextHistory,
    cfg: PlannerConfig,
    *,
    speculative: bool = False,
    heard_end: int | None = None,
) -> Plan:
    chars = cfg.final_context_chars if kind is DecodeKind.FINAL else cfg.partial_context_chars
    settings = utt.settings  # its language and prompt: those it opened with
    window = MAX_WINDOW_SAMPLES if kind is DecodeKind.FINAL else cfg.partial_window
    if utt.alone:  # its context misled the model: the audio decides (a set prompt stays)
        context = Context(utt.start, (), settings.prompt.strip()[-PROMPT_CHARS:])
    else:
        context = history.context(
            utt.start, end, settings.context_language, chars, utt.voice, cfg.max_voice_change,
            window, prompt=settings.prompt, since=settings.prompt_from,
            request_from=settings.context_from,
        )  # fmt: skip
    prefix = utt.agreement.stable_text
    cut = None
    if cfg.tail is not None and not (utt.alone or utt.whole):
        stable_count = utt.agreement.stable_count
        cut = choose_cut(utt.stable_timed, stable_count, utt.start, end, cfg.tail)
    if cut is None:
        return Plan(utt, kind, context.start, end, context, prefix, speculative, heard_end)
    # The stable words before the cut are the prompt's end, the rest are forced.
    lead = lead_text(cut.lead)
    prompt = f"{context.prompt} {context.text} {lead}".strip()[-PROMPT_CHARS:]
    forced = " ".join(utt.agreement.stable_words[len(cut.lead) :])
    tail_context = Context(cut.start, (), prompt)
    return Plan(utt, kind, cut.start, end, tail_context, forced, speculative, heard_end, cut.lead)
