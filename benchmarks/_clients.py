"""The voice-agent frameworks' STT clients, unchanged but for base URL and API key, driven on
real speech paced in real time, and the scores their transcripts get.

Shared by benchmarks/bench_clients.py and tests/streaming/server/test_voice_agents_fragments.py.
Each surface runs the plugin as its framework runs it by default:

- ``pipecat_deepgram``, ``pipecat_openai``, ``pipecat_realtime``: Pipecat 1.14's
  ``DeepgramSTTService``, ``OpenAISTTService`` and ``OpenAIRealtimeSTTService`` after a
  ``VADProcessor(vad_analyzer=SileroVADAnalyzer())`` (VAD defaults: start 0.2 s, stop 0.2 s,
  confidence 0.7). The VAD's user-started/stopped frames drive the services: Deepgram sends
  ``Finalize`` on each stop, OpenAISTTService posts each segment to /v1/audio/transcriptions,
  the Realtime service sends ``input_audio_buffer.commit``.
- ``livekit_deepgram``: LiveKit Agents 1.8.9's ``deepgram.STT().stream()`` (interim results,
  endpointing 25 ms; an agent session never flushes it: the plugin has no manual flush).
- ``livekit_openai``: ``openai.STT()`` (REST) wrapped as an agent session wraps a
  non-streaming STT, ``stt.StreamAdapter(stt=..., vad=silero.VAD.load())``: each VAD segment
  is posted as one file.

Audio goes in 20 ms frames at real time (a frame's wall time is its audio time); after the
audio the driver waits until no event has come for ``QUIET_S`` (``CUT_WAIT_S`` while a cut
is unanswered: a final later than that counts as missing) and then closes the client.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from bench_accuracy import Item as Speech  # one recording: 16 kHz audio, what it says

SR = 16000
FRAME = 320  # samples: 20 ms, as the frameworks send audio
KEY = "clients-key"
QUIET_S = 6.0  # after the audio, the run ends once no event has come for this long
CUT_WAIT_S = 20.0  # or this long where the last event is a cut not yet answered
SETTLE_MAX_S = 40.0  # and at the latest this long after the audio
CUTS = {"vad_stop", "speech_end"}  # the client's ends of speech (LiveKit: also the server's)
STARTS = {"vad_start", "speech_start"}
TAIL_S = 2.0  # silence after the speech, so the last turn ends
JFK_TEXT = (
    "And so my fellow Americans, ask not what your country can do for you, "
    "ask what you can do for your country."
)
JFK_PATH = Path(__file__).resolve().parents[1] / "tests" / "data" / "jfk.flac"
SURFACES = (
    "pipecat_deepgram",
    "pipecat_openai",
    "pipecat_realtime",
    "livekit_deepgram",
    "livekit_openai",
)


@dataclass
class Run:
    """What one client heard: its finals, and its events on the audio clock (seconds)."""

    surface: str
    speech: str
    finals: list[str] = field(default_factory=list)
    events: list[tuple[float, str, str]] = field(default_factory=list)
    error: str | None = None
    wall_s: float = 0.0

    def note(self, t0: float, kind: str, text: str = "") -> None:
        self.events.append((round(time.monotonic() - t0, 3), kind, text))


# --- audio -----------------------------------------------------------------------------------
def with_tail(audio: np.ndarray, seconds: float = TAIL_S) -> np.ndarray:
    """The audio, then silence, so the client's VAD (and kettle's endpoint) ends the last turn."""
    return np.concatenate([audio.astype(np.float32), np.zeros(int(seconds * SR), np.float32)])


def jfk() -> Speech:
    from kettle.transcribe.audio.read import load_audio

    return Speech("jfk", with_tail(load_audio(JFK_PATH)), JFK_TEXT)


def conversations(eval_path: Path, count: int, clips_each: int = 6) -> list[Speech]:
    """``count`` conversations of real voices, disjoint clips, 0.6-2 s gaps (bench_accuracy's
    set (a) builders: its clip filter, round-robin over categories, and `join`)."""
    import bench_accuracy as ba

    clips = ba.load_eval(eval_path)
    pool = [c for c in clips if c[3] in ba.REAL_VOICES and 2.0 <= len(c[1]) / SR <= 9.0]
    picked = ba.pick_mixed(pool, count * clips_each)
    out = []
    for k in range(count):
        group = picked[k * clips_each : (k + 1) * clips_each]
        item = ba.join(f"conv{k + 1}", [(c[1], c[2]) for c in group], seed=k)
        out.append(Speech(item.name, with_tail(item.audio), item.reference))
    return out


def pcm16(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()


async def paced(audio: np.ndarray, send: Callable[[bytes], Awaitable[None]]) -> None:
    """Sends 20 ms frames, each at its own audio time from the first (no drift)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    for k, i in enumerate(range(0, len(audio), FRAME)):
        delay = start + k * FRAME / SR - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        await send(pcm16(audio[i : i + FRAME]))


def unanswered(run: Run) -> bool:
    """Whether the last event is a cut with no final since the speech it ended began."""
    if not run.events or run.events[-1][1] not in CUTS:
        return False
    for _, kind, _ in reversed(run.events):
        if kind == "final":
            return False
        if kind in STARTS:
            return True
    return True


async def settle(run: Run, t0: float) -> None:
    """Waits, after the audio, until the client has been quiet for QUIET_S, or CUT_WAIT_S
    where its last event is a cut still unanswered (a posted segment's transcript may come
    late), and SETTLE_MAX_S at most. Quiet counts from the audio's end or the last event."""
    audio_end = time.monotonic()
    deadline = audio_end + SETTLE_MAX_S
    while time.monotonic() < deadline:
        last = max(audio_end, t0 + (run.events[-1][0] if run.events else 0.0))
        wait = CUT_WAIT_S if unanswered(run) else QUIET_S
        if time.monotonic() - last >= wait:
            return
        await asyncio.sleep(0.1)


# --- Pipecat ---------------------------------------------------------------------------------
def pipecat_service(surface: str, base: str, key: str) -> Any:
    from pipecat.services.deepgram.stt import DeepgramSTTService
    from pipecat.services.openai.stt import OpenAIRealtimeSTTService, OpenAISTTService

    if surface == "pipecat_deepgram":
        return DeepgramSTTService(api_key=key, base_url=base)
    if surface == "pipecat_openai":
        return OpenAISTTService(api_key=key, base_url=base + "/v1")
    ws = "ws" + base[len("http") :] + "/v1/realtime"
    return OpenAIRealtimeSTTService(api_key=key, base_url=ws)


async def drive_pipecat(surface: str, base: str, key: str, speech: Speech, run: Run) -> None:
    from pipecat.audio.vad.silero import SileroVADAnalyzer
    from pipecat.frames.frames import (
        EndFrame,
        ErrorFrame,
        Frame,
        InputAudioRawFrame,
        InterimTranscriptionFrame,
        TranscriptionFrame,
        VADUserStartedSpeakingFrame,
        VADUserStoppedSpeakingFrame,
    )
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.runner import PipelineRunner
    from pipecat.pipeline.task import PipelineParams, PipelineTask
    from pipecat.processors.audio.vad_processor import VADProcessor
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

    t0 = 0.0  # set when the first frame goes (the audio clock's zero)

    class Collect(FrameProcessor):
        """Records the finals, and the VAD's cuts that drive the service."""

        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TranscriptionFrame):
                run.finals.append(frame.text)
                run.note(t0, "final", frame.text)
            elif isinstance(frame, InterimTranscriptionFrame):
                run.note(t0, "interim", frame.text)
            elif isinstance(frame, VADUserStartedSpeakingFrame):
                run.note(t0, "vad_start")
            elif isinstance(frame, VADUserStoppedSpeakingFrame):
                run.note(t0, "vad_stop")
            await self.push_frame(frame, direction)

    class Errors(FrameProcessor):
        """Records the errors the services push upstream (a refused or failed connection)."""

        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, ErrorFrame):
                run.error = run.error or frame.error
                run.note(t0, "error", frame.error)
            await self.push_frame(frame, direction)

    vad = VADProcessor(vad_analyzer=SileroVADAnalyzer())
    stt = pipecat_service(surface, base, key)
    task = PipelineTask(
        Pipeline([Errors(), vad, stt, Collect()]), params=PipelineParams(audio_in_sample_rate=SR)
    )
    runner = PipelineRunner(handle_sigint=False)
    await runner.add_workers(task)  # (Pipecat 1.3+: workers first, then run())
    running = asyncio.create_task(runner.run())
    try:
        t0 = time.monotonic()

        async def send(pcm: bytes) -> None:
            await task.queue_frame(InputAudioRawFrame(audio=pcm, sample_rate=SR, num_channels=1))

        await paced(speech.audio, send)
        await settle(run, t0)
        await task.queue_frame(EndFrame())  # a segmented service transcribes what it queued
        await asyncio.wait_for(asyncio.shield(running), 30)
    finally:
        if not running.done():
            await task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(running, 10)


# --- LiveKit Agents --------------------------------------------------------------------------
def livekit_stt(surface: str, base: str, key: str) -> Any:
    from livekit.agents import stt as lk_stt
    from livekit.plugins import deepgram, silero
    from livekit.plugins import openai as lk_openai

    if surface == "livekit_deepgram":
        return deepgram.STT(api_key=key, base_url=base + "/v1/listen")
    rest = lk_openai.STT(api_key=key, base_url=base + "/v1")
    return lk_stt.StreamAdapter(stt=rest, vad=silero.VAD.load())


async def drive_livekit(surface: str, base: str, key: str, speech: Speech, run: Run) -> None:
    from livekit import rtc
    from livekit.agents import stt as lk_stt
    from livekit.agents import utils

    kinds = {
        lk_stt.SpeechEventType.START_OF_SPEECH: "speech_start",
        lk_stt.SpeechEventType.END_OF_SPEECH: "speech_end",
        lk_stt.SpeechEventType.INTERIM_TRANSCRIPT: "interim",
        lk_stt.SpeechEventType.FINAL_TRANSCRIPT: "final",
    }
    async with utils.http_context.open():
        stt = livekit_stt(surface, base, key)
        t0 = time.monotonic()

        def failed(error: Any) -> None:  # the plugin retries; each failed try is reported
            run.note(t0, "error", f"{type(error.error).__name__}: {error.error}")
            if not error.recoverable:
                run.error = run.error or f"{type(error.error).__name__}: {error.error}"

        stt.on("error", failed)
        stream = stt.stream()

        async def send(pcm: bytes) -> None:
            stream.push_frame(rtc.AudioFrame(pcm, SR, 1, len(pcm) // 2))

        async def listen() -> None:
            async for event in stream:
                kind = kinds.get(event.type)
                if kind is None:
                    continue
                text = event.alternatives[0].text if event.alternatives else ""
                if kind == "final":
                    run.finals.append(text)
                run.note(t0, kind, text)

        listening = asyncio.create_task(listen())
        try:
            await paced(speech.audio, send)
            await settle(run, t0)  # an agent session never ends its input: no last flush
        finally:
            if listening.done() and not listening.cancelled() and listening.exception():
                run.error = f"{type(listening.exception()).__name__}: {listening.exception()}"
            listening.cancel()
            with contextlib.suppress(BaseException):
                await listening
            await stream.aclose()
            await stt.aclose()


async def drive(surface: str, base: str, speech: Speech, *, key: str = KEY) -> Run:
    """One surface on one recording, bounded in time; a failed or late run keeps what it got."""
    run = Run(surface, speech.name)
    driver = drive_pipecat if surface.startswith("pipecat") else drive_livekit
    t0 = time.monotonic()
    try:
        bound = speech.seconds + SETTLE_MAX_S + 60  # the audio, settling, closing, starting
        await asyncio.wait_for(driver(surface, base, key, speech, run), bound)
    except Exception as exc:  # a failed client is a result, reported beside the others
        run.error = f"{type(exc).__name__}: {exc}"
    run.wall_s = round(time.monotonic() - t0, 2)
    return run


# --- the reading of the whole file -----------------------------------------------------------
def whole_file_text(audio: np.ndarray, decoder: Any) -> str:
    """What `kettle transcribe` reads in the whole recording (the file pipeline)."""
    from kettle.transcribe.files.pipeline import transcribe_audio

    return str(transcribe_audio(audio, decoder).text)


# --- scoring ---------------------------------------------------------------------------------
def words(text: str) -> list[str]:
    """Whisper's English normalizer, split into words."""
    from whisper_normalizer.english import EnglishTextNormalizer

    return str(EnglishTextNormalizer()(text)).split()


def wer(reference: str, hypothesis: str) -> float:
    import jiwer

    ref, hyp = " ".join(words(reference)), " ".join(words(hypothesis))
    if not ref:
        return 0.0 if not hyp else 1.0
    return float(jiwer.wer(ref, hyp))


def token_loops(finals: Sequence[str], reference: str) -> list[str]:
    """Runs of one token 3+ times in a row ("s s s s") that the reference does not hold."""
    ref = words(reference)
    loops = []
    for final in finals:
        toks = words(final)
        i = 0
        while i < len(toks):
            j = i
            while j < len(toks) and toks[j] == toks[i]:
                j += 1
            if j - i >= 3 and not _contains(ref, toks[i:j]):
                loops.append(" ".join(toks[i:j]))
            i = j
    return loops


def repeated_runs(finals: Sequence[str], reference: str, least: int = 3) -> list[str]:
    """Runs of ``least``+ words said twice back to back, within one final or across two
    adjacent finals (the end of one, the start of the next), where the reference says them
    once. Each is reported once, as its longest doubled run."""
    ref = words(reference)
    per_final = [words(f) for f in finals]
    found: list[str] = []
    for i, toks in enumerate(per_final):
        found += _doubled(toks, ref, least, boundary=None)
        if i + 1 < len(per_final):
            # Across finals only where the doubled run spans the boundary.
            found += _doubled(toks + per_final[i + 1], ref, least, boundary=len(toks))
    return found


def _doubled(toks: list[str], ref: list[str], least: int, boundary: int | None) -> list[str]:
    """Longest back-to-back doubled runs (toks[p:p+n] == toks[p+n:p+2n]) not doubled in ref;
    with ``boundary``, only those whose two copies lie on either side of it."""
    out: list[str] = []
    p = 0
    while p < len(toks):
        hit = 0
        for n in range((len(toks) - p) // 2, least - 1, -1):
            if toks[p : p + n] != toks[p + n : p + 2 * n]:
                continue
            if boundary is not None and p + n != boundary:
                continue
            if _contains(ref, toks[p : p + n] * 2):
                continue
            hit = n
            break
        if hit:
            out.append(" ".join(toks[p : p + hit]))
            p += 2 * hit
        else:
            p += 1
    return out


def _contains(seq: list[str], part: list[str]) -> bool:
    n = len(part)
    return any(seq[i : i + n] == part for i in range(len(seq) - n + 1))


def spans(run: Run) -> list[tuple[float, float]]:
    """The client's speech spans (start, end) on the audio clock: what each cut closed."""
    out: list[tuple[float, float]] = []
    opened: float | None = None
    for t, kind, _ in run.events:
        if kind in STARTS and opened is None:
            opened = t
        elif kind in CUTS and opened is not None:
            out.append((opened, t))
            opened = None
    return out


def score(run: Run, reference: str, whole_wer: float) -> dict[str, Any]:
    """A run's row: WER, the whole-file WER, the difference in points, loops and repeats."""
    text = " ".join(run.finals)
    got = wer(reference, text)
    cuts = collections.Counter(kind for _, kind, _ in run.events)
    return {
        "surface": run.surface,
        "speech": run.speech,
        "wer": round(100 * got, 2),
        "whole_file_wer": round(100 * whole_wer, 2),
        "points": round(100 * (got - whole_wer), 2),
        "finals": len(run.finals),
        "empty_finals": sum(1 for f in run.finals if not f.strip()),
        "cuts": cuts.get("vad_stop", 0) + cuts.get("speech_end", 0),
        "shortest_span_s": round(min((b - a for a, b in spans(run)), default=0.0), 2),
        "loops": len(token_loops(run.finals, reference)),
        "repeats": len(repeated_runs(run.finals, reference)),
        "error": run.error or "",
    }
