"""The item ledger of an OpenAI Realtime transcription session: which utterances of kettle's
stream make which item, and the server events the engine's events become (speech_started,
speech_stopped, committed, transcription deltas and completed events, errors at the end).
The codec (openai_realtime.py) adds the client's events on top; its docstring says how
utterances map onto items."""

from __future__ import annotations

from collections import deque

from kettle.streaming.core.events import (
    Done,
    Error,
    Event,
    Final,
    Finalized,
    NoTranscript,
    Partial,
    Revision,
    SpeechStarted,
    SpeechStopped,
)
from kettle.streaming.protocols import error_codes as codes
from kettle.streaming.protocols.base import (
    REVISION_HORIZON,
    Action,
    AudioReceived,
    CodecContext,
    Send,
)
from kettle.streaming.protocols.lifecycle import CodecLifecycle, CodecPhase
from kettle.streaming.protocols.openai import realtime_events as bodies
from kettle.streaming.protocols.openai.realtime_input import InputBuffer, Retunes
from kettle.streaming.protocols.openai.realtime_items import Finalizing, Item, Utterance
from kettle.streaming.protocols.openai.realtime_settings import (
    MIN_COMMIT_MS,
    TRANSCRIBE_PREFIX,
    RealtimeSettings,
)
from kettle.streaming.protocols.openai.realtime_writer import EventWriter
from kettle.transcribe.types import SAMPLE_RATE, Word


class ItemLedger:
    """The session's items and the engine-side events; RealtimeCodec builds on it. Events
    are framed by the ``EventWriter``; the input audio is the ``InputBuffer``'s, and which
    settings an utterance was decoded under the ``Retunes``'."""

    settings: RealtimeSettings

    def __init__(self, context: CodecContext, settings: RealtimeSettings | None = None) -> None:
        self.context = context
        self.settings = settings or RealtimeSettings()
        self._writer = EventWriter(context.session_id)
        self._input = InputBuffer(self.settings)
        self._retunes = Retunes()
        self._by_start: dict[int, tuple[Utterance, Item | None]] = {}
        self._unassigned: list[Utterance] = []  # manual: begun since the last marker
        self._pending: deque[Finalizing] = deque()
        self._last_committed: str | None = None
        self._closed_by_commit = False  # a vad_commit's Finalize ended an open utterance
        self._last_stop_ms = 0.0  # where the VAD's last utterance ended
        self._life = CodecLifecycle()  # the session's end is the runner's: it never stops
        # kettle_revisions: final's number -> its utterance and end sample, while a revision
        # may still come for it.
        self._revisable: dict[int, tuple[Utterance, int]] = {}

    @property
    def phase(self) -> CodecPhase:
        return self._life.phase

    @property
    def audio_started(self) -> bool:
        """The stream is open (audio was appended)."""
        return not self._life.awaiting_audio

    def _committed(self, item: Item) -> Send:
        item.committed = True
        body = {"previous_item_id": self._last_committed, "item_id": item.item_id}
        self._last_committed = item.item_id
        return self._writer.send("input_audio_buffer.committed", body)

    # -- engine events ----------------------------------------------------------------------

    def on_event(self, event: Event, received: AudioReceived) -> list[Action]:
        if isinstance(event, Partial):
            return self._progress(self._utterance(event.start, stable=event.stable))
        if isinstance(event, Final):
            if self.settings.revisions:
                self._keep_revisable(event)
            final = self._utterance(event.start, text=event.text, words=event.words,
                                    language=event.language)  # fmt: skip
            return self._progress(final)
        if isinstance(event, Revision):
            return self._revision(event) if self.settings.revisions else []
        if isinstance(event, NoTranscript):
            return self._progress(self._utterance(event.start, text=""))
        if isinstance(event, SpeechStarted):
            return self._speech_started(event)
        if isinstance(event, SpeechStopped):
            return self._speech_stopped(event)
        if isinstance(event, Finalized):
            return self._finalized(event.position)
        if isinstance(event, Error):
            return self._engine_error(event)
        if isinstance(event, Done):
            return self._done(event)
        return []  # pragma: no cover - Event is a closed union

    def _utterance(
        self,
        start: int,
        *,
        stable: str | None = None,
        text: str | None = None,
        words: tuple[Word, ...] = (),
        language: str = "",
    ) -> Item | None:
        found = self._by_start.get(start)
        if found is None:
            return None
        utt, item = found
        if stable is not None and utt.text is None:
            utt.stable = stable
        if text is not None:
            utt.text = text
            utt.words, utt.language = words, language
            if item is None or item.completed or item.cleared:
                del self._by_start[start]
        return item

    def _speech_started(self, event: SpeechStarted) -> list[Action]:
        logprobs = self._retunes.logprobs_of(event.retunes, self.settings.logprobs)
        utt = Utterance(event.start, logprobs=logprobs)
        if self.settings.turn_detection is None:
            self._unassigned.append(utt)
            self._by_start[event.start] = (utt, None)
            return []
        item = Item(self._writer.item_id(), [utt], logprobs=utt.logprobs)
        utt.item = item
        self._by_start[event.start] = (utt, item)
        # Produced before a clear the client asked for (that clear's marker has not come).
        if self._pending and self._pending[0].purpose == "clear":
            item.cleared = True
            return []
        ms = round(event.start * 1000 / SAMPLE_RATE)
        return [
            self._writer.send(
                "input_audio_buffer.speech_started", {"audio_start_ms": ms, "item_id": item.item_id}
            )
        ]

    def _speech_stopped(self, event: SpeechStopped) -> list[Action]:
        end_ms = event.end * 1000 / SAMPLE_RATE
        self._last_stop_ms = max(self._last_stop_ms, end_ms)
        found = self._by_start.get(event.start)
        if found is None or found[1] is None or found[1].cleared or found[1].committed:
            return []
        item = found[1]
        if event.reason == "finalize" and self._pending:
            self._closed_by_commit |= self._pending[0].purpose == "vad_commit"
        item.seconds = (event.end - event.start) / SAMPLE_RATE
        self._input.boundary_ms = max(self._input.boundary_ms, end_ms)
        actions: list[Action] = [
            self._writer.send(
                "input_audio_buffer.speech_stopped",
                {"audio_end_ms": round(end_ms), "item_id": item.item_id},
            )
        ]
        actions.append(self._committed(item))
        return actions + self._progress(item)

    def _finalized(self, position: int) -> list[Action]:
        if not self._pending:
            return []
        done = self._pending.popleft()
        if done.purpose == "commit" and done.item is not None:
            item = done.item
            item.utterances, self._unassigned = self._unassigned, []
            item.assigned = True
            for u in item.utterances:
                u.item = item
                self._by_start[u.start] = (u, item)
            return self._progress(item)
        if done.purpose == "clear":
            for u in self._unassigned:
                self._by_start.pop(u.start, None)
            self._unassigned = []
            return []
        if done.purpose == "vad_commit" and done.item is not None and not self._closed_by_commit:
            # No utterance was open: the commit holds what came after the last one, which
            # the VAD heard as no speech. Measured now that every stop before it is known.
            gap_ms = position * 1000 / SAMPLE_RATE - max(done.start_ms, self._last_stop_ms)
            if gap_ms < MIN_COMMIT_MS:
                return [self._empty_commit(gap_ms, done.client_event)]
            item = done.item
            item.item_id = self._writer.item_id()
            item.seconds = gap_ms / 1000
            return [self._committed(item), *self._progress(item)]
        return []

    def _empty_commit(self, buffered_ms: float, client_event: str | None) -> Send:
        return self._writer.error(
            "Error committing input audio buffer: buffer too small. Expected at least "
            f"{MIN_COMMIT_MS:.0f}ms of audio, but buffer only has {max(buffered_ms, 0):.2f}ms "
            "of audio.",
            code="input_audio_buffer_commit_empty",
            client_event=client_event,
        )

    def _progress(self, item: Item | None) -> list[Action]:
        if item is None or not item.committed or item.cleared or item.completed:
            return []
        actions: list[Action] = []
        visible = item.visible()
        if len(visible) > len(item.emitted) and visible.startswith(item.emitted):
            delta = visible[len(item.emitted) :]
            item.emitted = visible
            body = bodies.delta(item.item_id, delta, self._new_words(item))
            actions.append(self._writer.send(TRANSCRIBE_PREFIX + "delta", body))
        if item.resolved:
            item.completed = True
            for u in item.utterances:
                self._by_start.pop(u.start, None)
            words = item.settled_words() if item.wants_logprobs else None
            body = bodies.completed(item.item_id, visible, item.seconds, item.languages(), words)
            actions.append(self._writer.send(TRANSCRIBE_PREFIX + "completed", body))
            if item.corrected:  # a revision came before the item completed
                actions.append(self._correction(item))
        return actions

    # -- corrections (kettle_revisions) -----------------------------------------------------

    def _keep_revisable(self, event: Final) -> None:
        found = self._by_start.get(event.start)
        if found is None:
            return
        self._revisable[event.utterance] = (found[0], event.end)
        horizon = event.end - REVISION_HORIZON
        for number in [n for n, (_, end) in self._revisable.items() if end < horizon]:
            del self._revisable[number]

    def _revision(self, event: Revision) -> list[Action]:
        """A refinement corrected one of an item's finals: once the item has completed,
        another ``completed`` event for it with the corrected whole transcript."""
        found = self._revisable.get(event.utterance)
        if found is None:
            return []
        utt = found[0]
        utt.revised, utt.revised_words = event.text, event.words
        item = utt.item
        if item is None or not item.completed or item.cleared or item.failed:
            return []  # a cleared or failed item never says more; others complete later
        return [self._correction(item, event)]

    def _correction(self, item: Item, revision: Revision | None = None) -> Send:
        """The item's ``completed`` event again: same item and content index, the transcript
        with every correction so far, a fresh event id."""
        words = item.latest_words() if item.wants_logprobs else None
        body = bodies.completed(item.item_id, item.latest(), item.seconds, item.languages(), words)
        return self._writer.send(TRANSCRIBE_PREFIX + "completed", body, revision=revision)

    def _new_words(self, item: Item) -> list[Word] | None:
        """A delta's logprobs: the final words settled since the item's last delta (a word
        first sent as a partial's stable text has its probability only once its final is
        in), so the deltas' logprobs add up to the completed event's."""
        if not item.wants_logprobs:
            return None
        settled = item.settled_words()
        new, item.words_sent = settled[item.words_sent :], len(settled)
        return new

    def _engine_error(self, event: Error) -> list[Action]:
        if event.code in (codes.OVERLOADED, codes.RATE_LIMITED):
            return []  # partials skipped: deltas just come later; nothing to act on
        if not event.fatal:
            return [self._writer.error(event.message, code=event.code, kind="server_error")]
        actions: list[Action] = []
        for _, item in list(self._by_start.values()):
            if item is not None and item.committed and not item.completed:
                item.completed = item.failed = True
                body = bodies.failed(item.item_id, event.code, event.message)
                actions.append(self._writer.send(TRANSCRIBE_PREFIX + "failed", body))
        body = bodies.error(event.message, code=event.code, kind="server_error")
        return [
            *actions,
            self._writer.send("error", body, closing=True, fatal=True, error_code=event.code),
        ]

    def _done(self, event: Done) -> list[Action]:
        return [self._writer.send("error", bodies.done_error(event.reason), closing=True)]
