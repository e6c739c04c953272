"""The official OpenAI SDK, unchanged but for its base URL, against a real kettle server on
127.0.0.1:0 with the embedded tiny.en model (and base for translations): audio REST in every
response format, streaming, word timestamps, errors and retries; Realtime transcription
sessions; and the README's "From the OpenAI SDK" snippets exactly as written there."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import openai
import pytest
import soxr
from kettle.streaming.protocols.openai import rest
from kettle.streaming.server.server import ServerConfig
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.files.pipeline import PipelineConfig
from kettle.transcribe.files.windows import split_windows
from kettle.transcribe.model.fake import FakeDecoder, synth_voice
from websockets.asyncio.client import connect

from tests.conftest import pcm16, readme_python_blocks
from tests.streaming.server.server_thread import ServerThread

pytestmark = pytest.mark.slow

KEY = "test-key"
CLIP = "jfk__openai_whisper_jfk.flac"  # 11 s, pauses between phrases
README = Path(__file__).resolve().parents[3] / "README.md"
TRANSCRIBED = "conversation.item.input_audio_transcription."


@pytest.fixture(scope="module")
def server(serve_in_thread: Callable[..., ServerThread], tiny_decoder: Any) -> ServerThread:
    return serve_in_thread(tiny_decoder, api_keys=(KEY,))


@pytest.fixture(scope="module")
def client(server: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)


@pytest.fixture(scope="module")
def clip(eval_clip: Callable[[str], Any]) -> tuple[Path, str]:
    found = eval_clip(CLIP)
    return found.path, found.reference


def pcm24k(path: Path) -> bytes:
    return pcm16(soxr.resample(load_audio(path), 16000, 24000))


# -- REST -------------------------------------------------------------------------------------


def test_json_text_srt_vtt(
    client: openai.OpenAI, clip: tuple[Path, str], wer_fn: Callable[..., float]
) -> None:
    path, reference = clip
    result = client.audio.transcriptions.create(model="whisper-1", file=path)
    assert wer_fn([reference], [result.text]) < 0.15
    assert result.usage is not None and result.usage.type == "duration"
    text = client.audio.transcriptions.create(model="tiny.en", file=path, response_format="text")
    assert isinstance(text, str) and text.strip() == result.text
    # The names LiveKit's and Pipecat's OpenAI plugins send by default name the served model.
    for model in ("gpt-4o-mini-transcribe", "gpt-transcribe", "gpt-4o-transcribe-2025-03-20"):
        named = client.audio.transcriptions.create(model=model, file=path)
        assert named.text == result.text
    for fmt in ("srt", "vtt"):
        subtitles = client.audio.transcriptions.create(
            model="whisper-1", file=path, response_format=fmt
        )
        assert isinstance(subtitles, str) and subtitles.startswith(
            "WEBVTT" if fmt == "vtt" else "1\n"
        )
        times = re.findall(r"(\d\d):(\d\d):(\d\d)[,.](\d{3}) --> ", subtitles)
        starts = [int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000 for h, m, s, ms in times]
        assert len(starts) >= 2 and starts == sorted(starts) and starts[-1] < 11.0


def test_verbose_json_segments_and_words(client: openai.OpenAI, clip: tuple[Path, str]) -> None:
    path, _ = clip
    result = client.audio.transcriptions.create(
        model="whisper-1",
        file=path,
        response_format="verbose_json",
        timestamp_granularities=["word", "segment"],
    )
    assert result.language == "english" and abs(result.duration - 11.0) < 0.01
    assert result.segments and result.words
    for i, seg in enumerate(result.segments):
        assert seg.id == i and 0 <= seg.start < seg.end <= 11.0
        assert -5 < seg.avg_logprob <= 0 and 0 <= seg.no_speech_prob <= 1
        assert seg.compression_ratio > 0 and seg.temperature >= 0
        assert seg.seek == round(seg.start * 100)
        # The decoder's tokens belong to a window; only a window that is one segment has them.
        assert all(isinstance(t, int) for t in seg.tokens)
    words = result.words
    assert " ".join(w.word for w in words).split() == result.text.split()
    assert all(0 <= w.start <= w.end <= 11.0 for w in words)
    assert [w.start for w in words] == sorted(w.start for w in words)
    without = client.audio.transcriptions.create(
        model="whisper-1", file=path, response_format="verbose_json"
    )
    assert without.words is None and without.segments


def test_stream_true(client: openai.OpenAI, clip: tuple[Path, str]) -> None:
    path, _ = clip
    events = list(client.audio.transcriptions.create(model="whisper-1", file=path, stream=True))
    assert [e.type for e in events[:-1]] == ["transcript.text.delta"] * (len(events) - 1)
    assert events[-1].type == "transcript.text.done" and len(events) >= 2
    assert "".join(e.delta for e in events[:-1]) == events[-1].text  # type: ignore[union-attr]


def test_format_comes_from_the_bytes(client: openai.OpenAI, clip: tuple[Path, str]) -> None:
    path, _ = clip
    flac = path.read_bytes()  # sent under a misleading name
    result = client.audio.transcriptions.create(model="whisper-1", file=("talk.mp3", flac))
    assert "country" in result.text.lower()
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.transcriptions.create(model="whisper-1", file=("a.wav", b"not audio" * 50))
    assert info.value.status_code == 400 and info.value.body["param"] == "file"  # type: ignore[index]


def test_errors(server: ServerThread, clip: tuple[Path, str]) -> None:
    path, _ = clip
    bad = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.audio.transcriptions.create(model="whisper-1", file=path)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    good = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
    assert [m.id for m in good.models.list()] == ["tiny.en", *rest.MODEL_ALIASES]
    assert good.models.retrieve("tiny.en").owned_by == "kettle"
    with pytest.raises(openai.NotFoundError):
        good.models.retrieve("gpt-5")
    with pytest.raises(openai.NotFoundError):
        good.audio.transcriptions.create(model="gpt-5", file=path)
    with pytest.raises(openai.BadRequestError) as info:
        good.audio.transcriptions.create(model="whisper-1", file=path, response_format="xml")  # type: ignore[call-overload]
    body = info.value.body
    assert isinstance(body, dict) and set(body) == {"message", "type", "param", "code"}
    with pytest.raises(openai.BadRequestError):  # tiny.en is English-only
        good.audio.translations.create(model="whisper-1", file=path)


def test_upload_too_large_is_413(tiny_decoder: Any) -> None:
    running = ServerThread(ServerConfig(port=0, max_upload_bytes=1000), lambda: tiny_decoder)
    try:
        sdk = openai.OpenAI(base_url=running.url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as info:
            sdk.audio.transcriptions.create(model="whisper-1", file=("a.wav", b"\0" * 5000))
        assert info.value.status_code == 413
    finally:
        running.close()


def test_translations_on_base(espeak: Callable[..., np.ndarray]) -> None:
    from kettle.transcribe.errors import ModelError
    from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter

    try:
        base = WhisperAdapter(ModelConfig(name="base", threads=2))
    except ModelError as exc:
        pytest.skip(f"Whisper base is not installed: {exc}")
    german = espeak("Guten Morgen. Ich habe heute leider keine Zeit.", "-v", "de")
    wav = (np.clip(german, -1, 1) * 32767).astype("<i2")
    import io

    import soundfile as sf

    buffer = io.BytesIO()
    sf.write(buffer, wav, 16000, format="WAV", subtype="PCM_16")
    running = ServerThread(ServerConfig(port=0), lambda: base)
    try:
        sdk = openai.OpenAI(base_url=running.url + "/v1", api_key="x", max_retries=0)
        assert [m.id for m in sdk.models.list()] == ["base", *rest.MODEL_ALIASES]
        upload = ("morgen.wav", buffer.getvalue())
        heard = sdk.audio.transcriptions.create(model="base", file=upload, language="de")
        assert "morgen" in heard.text.lower()
        english = sdk.audio.translations.create(model="whisper-1", file=upload)
        # English, not the German heard: base's exact wording of espeak's German varies with
        # the espeak-ng build and the CPU's int8 path ("Good morning." / "Good and modern, ...").
        translated = english.text.lower()
        assert "good" in translated
        assert "morgen" not in translated and "guten" not in translated
        verbose = sdk.audio.translations.create(
            model="base", file=upload, response_format="verbose_json"
        )
        assert verbose.language == "german" and "good" in verbose.text.lower()
    finally:
        running.close()


class Gate:
    """A fake model whose first batch waits until released: one upload holds its slot."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.decoder = FakeDecoder(text_for=self._text)

    def _text(self, request: Any) -> str:
        self.started.set()
        self.release.wait(60)
        return "held"


def _wav_of(audio: np.ndarray) -> bytes:
    import io

    import soundfile as sf

    buffer = io.BytesIO()
    sf.write(buffer, audio, 16000, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def _wav(seconds: float) -> bytes:
    return _wav_of(synth_voice(seconds))


def test_full_server_429_and_the_sdk_retry_honours_retry_after() -> None:
    gate = Gate()
    running = ServerThread(
        ServerConfig(port=0, max_uploads=1, retry_after_s=1), lambda: gate.decoder
    )
    try:
        url = running.url + "/v1"
        first = threading.Thread(
            target=lambda: openai.OpenAI(
                base_url=url, api_key="x", max_retries=0
            ).audio.transcriptions.create(model="whisper-1", file=("a.wav", _wav(2.0)))
        )
        first.start()
        assert gate.started.wait(60)  # the only upload slot is taken
        seen: list[tuple[float, int, str | None]] = []

        def on_response(response: httpx2.Response) -> None:
            seen.append(
                (time.monotonic(), response.status_code, response.headers.get("retry-after"))
            )
            gate.release.set()  # the held upload may finish now; the retry finds a free slot

        def on_request(request: httpx2.Request) -> None:
            seen.append((time.monotonic(), 0, None))

        http = httpx2.Client(event_hooks={"request": [on_request], "response": [on_response]})
        second = openai.OpenAI(base_url=url, api_key="x", max_retries=5, http_client=http)
        result = second.audio.transcriptions.create(model="whisper-1", file=("b.wav", _wav(1.0)))
        first.join(60)
        assert result.text == "held"
        statuses = [s for _, s, _ in seen if s]
        assert statuses[0] == 429 and statuses[-1] == 200
        assert all(h == "1" for _, s, h in seen if s == 429)
        # Every retry came no sooner than the Retry-After the server asked for.
        for (t_resp, status, _), (t_next, kind, _) in zip(seen[1::2], seen[2::2], strict=False):
            assert status == 429 and kind == 0 and t_next - t_resp >= 0.95
    finally:
        gate.release.set()
        running.close()


def test_503_while_the_model_loads() -> None:
    loaded = threading.Event()

    def load() -> FakeDecoder:
        loaded.wait(60)
        return FakeDecoder()

    running = ServerThread(ServerConfig(port=0), load, wait_for_model=False)
    try:
        sdk = openai.OpenAI(base_url=running.url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.InternalServerError) as info:
            sdk.audio.transcriptions.create(model="whisper-1", file=("a.wav", _wav(1.0)))
        assert info.value.status_code == 503
        assert info.value.response.headers["retry-after"] == "5"
    finally:
        loaded.set()
        running.close()


# -- Realtime ---------------------------------------------------------------------------------


async def _collect_until(conn: Any, done: Callable[[list[Any]], bool]) -> list[Any]:
    events: list[Any] = []
    async with asyncio.timeout(120):  # a deadlock guard only
        async for event in conn:
            events.append(event)
            if done(events):
                return events
    return events


def _completed(events: list[Any]) -> list[Any]:
    return [e for e in events if e.type == TRANSCRIBED + "completed"]


async def test_realtime_server_vad(
    server: ServerThread, clip: tuple[Path, str], wer_fn: Callable[..., float]
) -> None:
    path, reference = clip
    pcm = pcm24k(path) + bytes(48000 * 2)  # and 2 s of silence: the last turn ends too
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=KEY)
    async with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        created = await conn.recv()
        assert created.type == "session.created"
        await conn.session.update(
            session={
                "type": "transcription",
                "audio": {
                    "input": {
                        "format": {"type": "audio/pcm", "rate": 24000},
                        "turn_detection": {"type": "server_vad", "silence_duration_ms": 500},
                    }
                },
            }
        )
        for i in range(0, len(pcm), 4800):  # 100 ms pieces
            await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i : i + 4800]).decode())

        def finished(events: list[Any]) -> bool:
            committed = [e for e in events if e.type == "input_audio_buffer.committed"]
            stopped = [e for e in events if e.type == "input_audio_buffer.speech_stopped"]
            starts = [e for e in events if e.type == "input_audio_buffer.speech_started"]
            return bool(starts) and len(starts) == len(stopped) == len(committed) == len(
                _completed(events)
            ) and committed[-1].item_id == _completed(events)[-1].item_id  # fmt: skip

        events = await _collect_until(conn, finished)
    types = [e.type for e in events]
    assert types[0] == "session.updated" and "error" not in types
    completed = _completed(events)
    for item in completed:
        deltas = [
            e.delta for e in events if e.type == TRANSCRIBED + "delta" and e.item_id == item.item_id
        ]
        assert "".join(deltas) == item.transcript
        assert item.usage.type == "duration" and item.usage.seconds > 0
    hypothesis = " ".join(c.transcript for c in completed)
    assert wer_fn([reference], [hypothesis]) < 0.15
    assert len(completed) >= 2  # the pauses between phrases end turns


async def test_realtime_manual_commit_clear_and_empty_commit(
    server: ServerThread, clip: tuple[Path, str], wer_fn: Callable[..., float]
) -> None:
    path, reference = clip
    pcm = pcm24k(path)
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=KEY)
    async with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        await conn.session.update(
            session={"type": "transcription", "audio": {"input": {"turn_detection": None}}}
        )
        await conn.input_audio_buffer.commit()  # nothing appended yet
        await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[:48000]).decode())
        await conn.input_audio_buffer.clear()
        await conn.input_audio_buffer.commit()  # cleared: empty again
        for i in range(0, len(pcm), 4800):
            await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i : i + 4800]).decode())
        await conn.input_audio_buffer.commit()
        events = await _collect_until(conn, lambda ev: bool(_completed(ev)))
    types = [e.type for e in events]
    errors = [e for e in events if e.type == "error"]
    assert [e.error.code for e in errors] == ["input_audio_buffer_commit_empty"] * 2
    assert "input_audio_buffer.cleared" in types
    assert "input_audio_buffer.speech_started" not in types
    (committed,) = [e for e in events if e.type == "input_audio_buffer.committed"]
    (completed,) = _completed(events)
    assert completed.item_id == committed.item_id
    assert wer_fn([reference], [completed.transcript]) < 0.15


async def test_realtime_auth(server: ServerThread) -> None:
    url = server.url.replace("http", "ws", 1) + "/v1/realtime?intent=transcription"
    bad = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="wrong")
    with pytest.raises(Exception, match="401"):
        async with bad.realtime.connect(extra_query={"intent": "transcription"}):
            pass
    # A browser's way: the key as a subprotocol; the server echoes only "realtime".
    async with connect(url, subprotocols=["realtime", f"openai-insecure-api-key.{KEY}"]) as ws:  # type: ignore[list-item]
        assert ws.subprotocol == "realtime"
        assert json.loads(await ws.recv())["type"] == "session.created"


# -- the README -------------------------------------------------------------------------------


def readme_snippets() -> list[str]:
    return readme_python_blocks("### From the OpenAI SDK")


def test_readme_snippets_run_as_written(
    server: ServerThread,
    clip: tuple[Path, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    wer_fn: Callable[..., float],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, reference = clip
    (tmp_path / "speech.flac").write_bytes(path.read_bytes())
    (tmp_path / "speech-24k.pcm").write_bytes(pcm24k(path))
    monkeypatch.chdir(tmp_path)
    snippets = readme_snippets()
    assert len(snippets) == 2
    for code in snippets:
        assert "http://127.0.0.1:8765/v1" in code and '"KETTLE_KEY"' in code
        code = code.replace("http://127.0.0.1:8765/v1", server.url + "/v1")
        code = code.replace('"KETTLE_KEY"', repr(KEY))
        exec(compile(code, str(README), "exec"), {"__name__": "__main__"})
        printed = capsys.readouterr().out
        assert wer_fn([reference], [printed]) < 0.15


def _raw_post(url: str, fields: dict[str, str], audio: bytes) -> socket.socket:
    """Send a whole multipart upload on a socket of our own, without reading the answer."""
    request = httpx2.Request("POST", url, data=fields, files={"file": ("a.wav", audio)})
    body = request.read()
    split = httpx2.URL(url)
    head = [f"POST {split.raw_path.decode()} HTTP/1.1", f"Host: {split.host}:{split.port}"]
    head += [f"{k}: {v}" for k, v in request.headers.items() if k.lower() != "host"]
    sock = socket.create_connection((split.host, split.port or 80))
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    return sock


def test_a_client_that_leaves_frees_its_slot_and_its_work(clip: tuple[Path, str]) -> None:
    gate = Gate()
    running = ServerThread(
        ServerConfig(port=0, max_uploads=1, retry_after_s=1), lambda: gate.decoder
    )
    try:
        url = running.url + "/v1"
        # Real speech (the windows are cut where the VAD hears pauses), 4.4 minutes: more
        # windows than the file pipeline hands the engine at once.
        audio = np.tile(load_audio(clip[0]), 24)
        windows = len(split_windows(audio, PipelineConfig().windows))
        first_call = PipelineConfig().batch_size
        assert windows > first_call
        long_upload = _wav_of(audio)
        sock = _raw_post(url + "/audio/transcriptions", {"model": "whisper-1"}, long_upload)
        assert gate.started.wait(60)  # its first window is in the model
        sock.close()  # the client leaves while the gate holds that window
        sdk = openai.OpenAI(base_url=url, api_key="x", max_retries=30)
        # 429 while the slot is held; once the server saw the client go, the slot is free
        # and this request gets as far as its (missing) model: 400.
        with pytest.raises(openai.BadRequestError):
            sdk.audio.transcriptions.create(model="", file=("b.wav", _wav(1.0)))
        gate.release.set()
        result = sdk.audio.transcriptions.create(model="whisper-1", file=("c.wav", _wav(1.0)))
        assert result.text == "held"
        long_windows = [r for r in gate.decoder.requests_seen if len(r.audio) > 5 * 16000]
        # Only the pipeline's first call reached the engine; the rest was never asked for.
        assert len(long_windows) <= first_call, "the rest of the departed upload was withdrawn"
    finally:
        gate.release.set()
        running.close()
