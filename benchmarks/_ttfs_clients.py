"""bench_ttfs's clients: one raw WebSocket connection per turn, speaking each API's public
protocol as its reference documents it, timing the final from the end of speech.

Every surface streams the turn in real time (20 ms frames, each sent once it would have been
recorded), then silence as a microphone does, until its final comes or ``WAIT_S`` passes.
Surfaces with a client-side stop (Finalize, commit, ForceEndpoint) send it ``STOP_S`` after
the end of speech, as Pipecat's VAD does; the others leave the end to the server.

- ``deepgram``: ``/v1/listen`` (nova-3, linear16, 16 kHz, interim results), ``Finalize``;
  the final is the ``Results`` with ``from_finalize``.
- ``endpoint``: the same with ``endpointing=25`` and no Finalize (LiveKit's Deepgram plugin);
  the final is the first ``speech_final`` Results that reaches the end of speech.
- ``openai``: ``/v1/realtime?intent=transcription``, 24 kHz PCM, ``turn_detection`` null,
  ``input_audio_buffer.commit``; the final is ``...input_audio_transcription.completed``.
- ``openai_vad``: the same with ``turn_detection: {"type": "server_vad"}`` (its defaults) and
  no commit; the final is the ``completed`` of the item whose ``speech_stopped.audio_end_ms``
  reaches the end of speech (a joined turn may be cut at a pause into several items: their
  transcripts are all part of the text).
- ``flux``: Deepgram Flux ``/v2/listen`` (flux-general-en, linear16, 16 kHz), nothing sent
  but audio; the final is the ``TurnInfo`` ``EndOfTurn`` whose ``audio_window_end`` reaches
  the end of speech (earlier EndOfTurns are part of the text).
- ``assemblyai``: Universal-Streaming v3 ``/v3/ws`` (16 kHz ``pcm_s16le``, the API's default
  speech model, ``format_turns=true``), ``{"type": "ForceEndpoint"}`` after the end of
  speech; the final is the end-of-turn ``Turn`` whose last word reaches the end of speech.
  kettle, as AssemblyAI, sends an unformatted end-of-turn Turn (lowercase, no punctuation)
  then, with ``format_turns``, a formatted one. The formatted one is taken as the final: it
  is what Pipecat's ``AssemblyAISTTService`` (``format_turns=True`` by default) hands on as
  its transcript, so the agent waits for it. The unformatted one's time is kept beside it.

``run_conversation`` streams every turn on one connection instead, ``gap_s`` of silence
after each (an agent speaking its reply), the stop after each turn as above: a voice agent
keeps its connection for the whole call, and each turn then has the ones before it.

"Reaches the end of speech": the message's audio ends at most ``END_SLACK_S`` before the
end of speech by the client's VAD (the server's VAD and word times differ from Silero's).
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from _ttfs_turns import SR, Turn

CHUNK_S = 0.02  # the client's frames: 20 ms, as the frameworks send them
STOP_S = 0.2  # the client VAD's stop_secs: Finalize / commit this long after speech ends
WAIT_S = 5.0  # a final later than this counts as missing
END_SLACK_S = 0.3
KEY = "bench"
SURFACES = ("deepgram", "endpoint", "openai", "openai_vad", "flux", "assemblyai")


@dataclass
class Outcome:
    """One turn on one surface: the time to its final (None: none within WAIT_S), the text
    of all its finals, the interim messages before it."""

    name: str
    ttfs_s: float | None
    text: str
    interims: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Heard:
    """What one server message means to the client: an interim, a final piece of text,
    and whether it is the turn's final (the clock stops)."""

    interim: bool = False
    final_text: str | None = None
    last: bool = False


class Listener:
    """A surface's reading of its server messages for one turn (subclasses: one each)."""

    def __init__(self, speech_end_s: float) -> None:
        self.speech_end_s = speech_end_s
        self.extra: dict[str, Any] = {}
        self.stopped = False  # the surface's stop (Finalize, commit, ForceEndpoint) was sent

    def reaches_end(self, audio_end_s: float) -> bool:
        return audio_end_s >= self.speech_end_s - END_SLACK_S

    def hear(self, msg: dict[str, Any], at: float) -> Heard | None:
        raise NotImplementedError


@dataclass(frozen=True)
class Surface:
    """How one API is spoken: where to connect, what to send first, how audio and the stop
    go on the wire, what closes the stream, and its listener."""

    url: str  # path and query, after ws://HOST:PORT
    headers: dict[str, str]
    listener: Callable[[float], Listener]
    rate: int = SR
    opening: tuple[dict[str, Any], ...] = ()
    stop: dict[str, Any] | None = None
    closing: dict[str, Any] | None = None
    base64_append: bool = False  # OpenAI: audio goes as input_audio_buffer.append JSON


# --- Deepgram /v1/listen ---------------------------------------------------------------------
class DeepgramFinalize(Listener):
    def hear(self, msg: dict[str, Any], at: float) -> Heard | None:
        if msg.get("type") != "Results":
            return None
        if not msg["is_final"]:
            return Heard(interim=True)
        text = msg["channel"]["alternatives"][0]["transcript"]
        return Heard(final_text=text, last=self.is_last(msg))

    def is_last(self, msg: dict[str, Any]) -> bool:
        """Whether this final Results stops the clock: the answer to Finalize."""
        return bool(msg.get("from_finalize"))


class DeepgramEndpoint(DeepgramFinalize):
    def is_last(self, msg: dict[str, Any]) -> bool:
        """No Finalize: the endpoint's speech_final that reaches the end of speech."""
        ends = self.reaches_end(msg["start"] + msg["duration"])
        return bool(msg.get("speech_final")) and ends


# --- OpenAI Realtime transcription -----------------------------------------------------------
class OpenAICommit(Listener):
    def hear(self, msg: dict[str, Any], at: float) -> Heard | None:
        kind = msg.get("type", "")
        if kind == "conversation.item.input_audio_transcription.delta":
            return Heard(interim=True)
        if kind == "conversation.item.input_audio_transcription.completed":
            return Heard(final_text=msg.get("transcript", ""), last=True)
        if kind == "error":
            print(f"openai error: {msg}", file=sys.stderr)
        return None


class OpenAIServerVad(Listener):
    def __init__(self, speech_end_s: float) -> None:
        super().__init__(speech_end_s)
        self._stopped: dict[str, float] = {}  # item id -> its audio_end_ms, seconds

    def hear(self, msg: dict[str, Any], at: float) -> Heard | None:
        kind = msg.get("type", "")
        if kind == "input_audio_buffer.speech_stopped":
            self._stopped[msg["item_id"]] = msg["audio_end_ms"] / 1000
        elif kind == "conversation.item.input_audio_transcription.delta":
            return Heard(interim=True)
        elif kind == "conversation.item.input_audio_transcription.completed":
            end = self._stopped.get(msg.get("item_id", ""))
            self.extra.setdefault("items", 0)
            self.extra["items"] += 1
            last = end is not None and self.reaches_end(end)
            return Heard(final_text=msg.get("transcript", ""), last=last)
        elif kind == "error":
            print(f"openai_vad error: {msg}", file=sys.stderr)
        return None


def openai_session(turn_detection: dict[str, Any] | None) -> dict[str, Any]:
    """The GA Realtime transcription session.update: 24 kHz PCM in, the turn detection given."""
    session = {
        "type": "transcription",
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "turn_detection": turn_detection,
                "transcription": {"model": "gpt-4o-transcribe"},
            }
        },
    }
    return {"type": "session.update", "session": session}


# --- Deepgram Flux ---------------------------------------------------------------------------
class FluxEndOfTurn(Listener):
    def hear(self, msg: dict[str, Any], at: float) -> Heard | None:
        if msg.get("type") == "Error":
            print(f"flux error: {msg}", file=sys.stderr)
        if msg.get("type") != "TurnInfo":
            return None
        if msg["event"] != "EndOfTurn":
            return Heard(interim=msg["event"] == "Update")
        self.extra.setdefault("triggers", []).append(msg.get("trigger"))
        last = self.reaches_end(msg["audio_window_end"])
        return Heard(final_text=msg["transcript"], last=last)


# --- AssemblyAI Universal-Streaming v3 -------------------------------------------------------
class AssemblyAIForceEndpoint(Listener):
    def hear(self, msg: dict[str, Any], at: float) -> Heard | None:
        if msg.get("type") == "Error":
            print(f"assemblyai error: {msg}", file=sys.stderr)
        if msg.get("type") != "Turn":
            return None
        if not msg["end_of_turn"]:
            return Heard(interim=True)
        # The answer to ForceEndpoint: the end of turn after it was sent. Not word times:
        # Whisper's last word often ends 0.3-0.4 s before the speech does ("clothes" at 2.08 s
        # where Silero ends the speech at 2.46), which left 4 of 34 turns without a final.
        if not msg["turn_is_formatted"]:
            if self.stopped:  # the unformatted end of turn: its time kept, not its text
                self.extra.setdefault("unformatted_at", at)
            return None
        return Heard(final_text=msg["transcript"], last=self.stopped)


def surfaces() -> dict[str, Surface]:
    deepgram_auth = {"Authorization": f"Token {KEY}"}
    listen = "/v1/listen?model=nova-3&encoding=linear16&sample_rate=16000&interim_results=true"
    close_stream = {"type": "CloseStream"}
    return {
        "deepgram": Surface(
            listen, deepgram_auth, DeepgramFinalize, stop={"type": "Finalize"}, closing=close_stream
        ),
        "endpoint": Surface(
            listen + "&endpointing=25&vad_events=true",
            deepgram_auth,
            DeepgramEndpoint,
            closing=close_stream,
        ),
        "openai": Surface(
            "/v1/realtime?intent=transcription",
            {"Authorization": f"Bearer {KEY}"},
            OpenAICommit,
            rate=24000,
            opening=(openai_session(None),),
            stop={"type": "input_audio_buffer.commit"},
            base64_append=True,
        ),
        "openai_vad": Surface(
            "/v1/realtime?intent=transcription",
            {"Authorization": f"Bearer {KEY}"},
            OpenAIServerVad,
            rate=24000,
            opening=(openai_session({"type": "server_vad"}),),
            base64_append=True,
        ),
        "flux": Surface(
            "/v2/listen?model=flux-general-en&encoding=linear16&sample_rate=16000",
            deepgram_auth,
            FluxEndOfTurn,
            closing=close_stream,
        ),
        "assemblyai": Surface(
            "/v3/ws?sample_rate=16000&encoding=pcm_s16le&format_turns=true",
            {"Authorization": KEY},
            AssemblyAIForceEndpoint,
            stop={"type": "ForceEndpoint"},
            closing={"type": "Terminate"},
        ),
    }


# --- streaming -------------------------------------------------------------------------------
def pcm16(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()


async def stream_turn(
    turn: Turn,
    send: Callable[[bytes], Awaitable[None]],
    stop: Callable[[], Awaitable[None]] | None,
    rate: int,
    done: asyncio.Event,
) -> float:
    """Send ``turn`` in real time (then silence until ``done``), ``stop()`` at the end of
    speech + STOP_S; returns the wall time of the end of speech."""
    from kettle.kernels.resample import resample

    audio = turn.audio if rate == SR else resample(turn.audio, SR, rate)
    step = int(CHUNK_S * rate)
    silence = pcm16(np.zeros(step, np.float32))
    start = time.monotonic()
    stop_at = turn.speech_end_s + STOP_S
    stopped = False
    k = 0
    while not done.is_set() and k * CHUNK_S < turn.speech_end_s + WAIT_S:
        delay = start + (k + 1) * CHUNK_S - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)  # a chunk goes once it would have been recorded
        piece = audio[k * step : (k + 1) * step]
        await send(pcm16(piece) if len(piece) == step else silence)
        k += 1
        if stop is not None and not stopped and k * CHUNK_S >= stop_at:
            await stop()
            stopped = True
    return start + turn.speech_end_s


async def send_audio(ws: Any, surface: Surface, chunk: bytes) -> None:
    """One frame of PCM on ``surface``'s wire: binary, or OpenAI's base64 append event."""
    if surface.base64_append:
        audio = base64.b64encode(chunk).decode()
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
    else:
        await ws.send(chunk)


async def run_turn(base: str, surface: Surface, turn: Turn) -> Outcome:
    """One connection: ``turn`` streamed on ``surface`` until its final (or WAIT_S after
    the end of speech), then the stream closed as the protocol closes it."""
    import websockets

    url = base.replace("http", "ws", 1) + surface.url
    done = asyncio.Event()
    listener = surface.listener(turn.speech_end_s)
    async with websockets.connect(url, additional_headers=surface.headers) as ws:
        for message in surface.opening:
            await ws.send(json.dumps(message))

        async def send(chunk: bytes) -> None:
            await send_audio(ws, surface, chunk)

        async def stop() -> None:
            await ws.send(json.dumps(surface.stop))
            listener.stopped = True

        sender = asyncio.create_task(
            stream_turn(turn, send, stop if surface.stop else None, surface.rate, done)
        )
        finals: list[str] = []
        interims, arrived = 0, None
        deadline = time.monotonic() + turn.audio.shape[0] / SR + WAIT_S + 1
        while arrived is None and time.monotonic() < deadline:
            try:
                raw = await asyncio.wait_for(ws.recv(), 0.5)
            except TimeoutError:
                continue
            at = time.monotonic()
            heard = listener.hear(json.loads(raw), at) if isinstance(raw, str) else None
            if heard is None:
                continue
            interims += heard.interim
            if heard.final_text:
                finals.append(heard.final_text.strip())
            if heard.last:
                arrived = at
        done.set()
        speech_end = await sender
        if surface.closing is not None:
            await ws.send(json.dumps(surface.closing))
    extra = dict(listener.extra)
    if "unformatted_at" in extra:
        extra["unformatted_ttfs_s"] = round(extra.pop("unformatted_at") - speech_end, 4)
    ttfs = None if arrived is None else arrived - speech_end
    return Outcome(turn.name, ttfs, " ".join(f for f in finals if f), interims, extra)


def join_turns(turns: Sequence[Turn], gap_s: float) -> tuple[np.ndarray, list[float]]:
    """``turns`` as one stream, ``gap_s`` of silence after each: its audio and each turn's
    start on its clock (seconds)."""
    gap = np.zeros(int(gap_s * SR), np.float32)
    starts, pieces, at = [], [], 0.0
    for turn in turns:
        starts.append(at)
        pieces += [turn.audio.astype(np.float32, copy=False), gap]
        at += (turn.audio.shape[0] + gap.shape[0]) / SR
    return np.concatenate(pieces) if pieces else gap, starts


async def run_conversation(
    base: str, surface: Surface, turns: Sequence[Turn], gap_s: float
) -> list[Outcome]:
    """One connection for all ``turns`` (``join_turns``), the stop ``STOP_S`` after each
    turn's speech; each turn's final timed from its own end of speech. Messages belong to
    the earliest turn without its final; a turn whose final has not come when the next
    turn's audio starts is missing."""
    import websockets
    from kettle.kernels.resample import resample

    audio, starts = join_turns(turns, gap_s)
    ends = [start + turn.speech_end_s for start, turn in zip(starts, turns, strict=True)]
    listeners = [surface.listener(end) for end in ends]
    wire = audio if surface.rate == SR else resample(audio, SR, surface.rate)
    step = int(CHUNK_S * surface.rate)
    finals: list[list[str]] = [[] for _ in turns]
    interims = [0] * len(turns)
    arrived: list[float | None] = [None] * len(turns)
    begun = 0  # the latest turn whose audio is streaming
    url = base.replace("http", "ws", 1) + surface.url
    async with websockets.connect(url, additional_headers=surface.headers) as ws:
        for message in surface.opening:
            await ws.send(json.dumps(message))
        clock = time.monotonic()

        async def send_all() -> None:
            nonlocal begun
            stops = 0
            for k in range(-(-wire.shape[0] // step)):
                delay = clock + (k + 1) * CHUNK_S - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                piece = wire[k * step : (k + 1) * step]
                await send_audio(ws, surface, pcm16(np.pad(piece, (0, step - piece.shape[0]))))
                heard_s = (k + 1) * CHUNK_S
                while begun + 1 < len(turns) and heard_s >= starts[begun + 1]:
                    begun += 1
                due = stops < len(turns) and heard_s >= ends[stops] + STOP_S
                if surface.stop is not None and due:
                    await ws.send(json.dumps(surface.stop))
                    listeners[stops].stopped = True
                    stops += 1

        sender = asyncio.create_task(send_all())
        current = 0
        deadline = None
        while current < len(turns):
            if sender.done():
                deadline = deadline or time.monotonic() + WAIT_S
                if time.monotonic() > deadline:
                    break
            try:
                raw = await asyncio.wait_for(ws.recv(), 0.5)
            except TimeoutError:
                continue
            at = time.monotonic()
            if begun > current:
                current = begun  # the turns before it never got their finals: missing
            heard = listeners[current].hear(json.loads(raw), at) if isinstance(raw, str) else None
            if heard is None:
                continue
            interims[current] += heard.interim
            if heard.final_text:
                finals[current].append(heard.final_text.strip())
            if heard.last:
                arrived[current] = at
                current += 1
        sender.cancel()
        if surface.closing is not None:
            await ws.send(json.dumps(surface.closing))
    outcomes = []
    for i, turn in enumerate(turns):
        came = arrived[i]
        ttfs = None if came is None else came - (clock + ends[i])
        text = " ".join(f for f in finals[i] if f)
        outcomes.append(Outcome(turn.name, ttfs, text, interims[i], dict(listeners[i].extra)))
    return outcomes
