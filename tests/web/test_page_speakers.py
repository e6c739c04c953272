"""Speaker labels on the page (kettle v1 `diarize`), in real headless Chromium.

A scripted server (the page's files, a /v1/info that says whether it labels speakers, and a
/v1/stream that plays a fixed script) checks: the Speakers checkbox is offered only when
/v1/info says `"speakers": true`; ticked, the config asks for `diarize`; each speaker's label
shows where the speaker changes, with a colour per speaker; a revision that changes the
speaker relabels the lines; the downloads carry `[Speaker N]`; and a server that refuses
`diarize` with `bad_message` takes the checkbox away. A slow test then plays two pitches
through kettle's own server (fake model, pitch speaker encoder). Node's tests cover the
transcript model's speaker rules.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

WEB_ROOT = Path(__file__).resolve().parents[2] / "web"
TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}


def _final(kind: str, n: int, start: float, end: float, text: str, speaker: int) -> str:
    return json.dumps(
        {"type": kind, "utterance": n, "start": start, "end": end, "text": text, "speaker": speaker}
    )


@dataclass
class Scripted:
    url: str = ""
    speakers: bool = True  # what /v1/info says
    refuse: bool = False  # refuse diarize with bad_message
    configs: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    from kettle.streaming.server.http_routes import PAGE_SECURITY_HEADERS
    from websockets.datastructures import Headers
    from websockets.http11 import Response
    from websockets.sync.server import ServerConnection, serve
    from websockets.typing import Subprotocol

    state = Scripted()

    def files(conn: ServerConnection, request: Any) -> Any:
        path = request.path.split("?", 1)[0]
        if path == "/v1/stream":
            return None
        if path == "/v1/info":
            info = {"ready": True, "model": "scripted", "multilingual": False}
            info |= {"auth": {"required": False}, "speakers": state.speakers}
            headers = Headers({"Content-Type": "application/json"})
            return Response(200, "OK", headers, json.dumps(info).encode())
        if path == "/readyz":
            return Response(200, "OK", Headers({"Content-Type": "text/plain"}), b"ready\n")
        target = WEB_ROOT / ("index.html" if path == "/" else path.lstrip("/"))
        if target.suffix not in TYPES or not target.is_file():
            return Response(404, "Not Found", Headers({"Content-Type": "text/plain"}), b"")
        headers = Headers({"Content-Type": TYPES[target.suffix], **PAGE_SECURITY_HEADERS})
        return Response(200, "OK", headers, target.read_bytes())

    def session(ws: ServerConnection) -> None:
        ready = {"type": "ready", "session_id": "s", "protocol": 1, "model": "scripted"}
        ws.send(json.dumps({**ready, "sample_rate": 16000}))
        audio, played = 0, False
        for message in ws:
            if isinstance(message, bytes):
                audio += len(message)
                if not played and audio >= 16000 and not state.refuse:
                    played = True
                    ws.send(_final("final", 0, 0.5, 1.0, "hello there", 0))
                    ws.send(_final("final", 1, 1.5, 2.0, "how are you", 0))
                    ws.send(_final("final", 2, 3.0, 4.0, "fine thanks", 1))
                    time.sleep(0.3)
                    # Utterance 1 was the second voice after all: the turns move.
                    ws.send(_final("revision", 1, 1.5, 2.0, "how are you", 1))
                continue
            msg = json.loads(message)
            if msg.get("type") == "config":
                state.configs.append(msg)
                if state.refuse and msg.get("diarize"):
                    error = {"type": "error", "code": "bad_message"}
                    error["message"] = "diarize is not available: this server has no speaker model"
                    ws.send(json.dumps(error))
            elif msg.get("type") == "stop":
                ws.send(json.dumps({"type": "done", "audio_seconds": audio / 32000}))
                return

    server = serve(
        session,
        "127.0.0.1",
        0,
        process_request=files,
        subprotocols=[Subprotocol("kettle.v1")],
        compression=None,
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.socket.getsockname()[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        thread.join(10)


LINES = """return [...document.querySelectorAll('#finals li')].map(li => [
  li.querySelector('.speaker')?.textContent ?? null, li.dataset.speaker ?? null,
  getComputedStyle(li).borderLeftColor])"""


def test_speakers_label_the_turns_and_the_downloads(
    scripted: Scripted,
    open_browser: Callable[..., Any],
    page_tools: Any,
    artifacts_dir: Path,
    tmp_path: Path,
) -> None:
    t = page_tools
    driver = open_browser()
    driver.get(scripted.url + "/")
    t.wait_ready(driver)
    box = driver.find_element("id", "speakers")
    t.wait(driver, lambda d: box.is_displayed(), 10, "no Speakers checkbox")
    box.click()
    driver.find_element("id", "start").click()
    t.wait(
        driver,
        lambda d: [line[0] for line in d.execute_script(LINES)] == ["Speaker 1", "Speaker 2", None],
        20,
        "the revision did not move the turn",
    )
    lines = driver.execute_script(LINES)
    assert [line[1] for line in lines] == ["0", "1", "1"]
    assert lines[0][2] != lines[1][2] == lines[2][2]  # a colour per speaker
    driver.save_screenshot(str(artifacts_dir / "web-page-speakers.png"))
    assert scripted.configs[0]["diarize"] is True
    driver.find_element("id", "stop").click()
    t.wait(driver, lambda d: t.text(d, "notice-text").startswith("Done:"), 20, "no done")
    downloads = tmp_path / "downloads"
    driver.find_element("id", "download-txt").click()
    assert t.read_download(downloads, ".txt") == (
        "[Speaker 1] hello there\n[Speaker 2] how are you fine thanks\n"
    )
    driver.find_element("id", "download-srt").click()
    srt = t.read_download(downloads, ".srt")
    assert "[Speaker 1] hello there" in srt and "[Speaker 2] fine thanks" in srt
    assert not t.severe(driver)


def test_no_checkbox_without_a_speaker_model_and_a_refusal_removes_it(
    scripted: Scripted, open_browser: Callable[..., Any], page_tools: Any
) -> None:
    t = page_tools
    scripted.speakers = False
    driver = open_browser()
    driver.get(scripted.url + "/")
    t.wait_ready(driver)
    assert not driver.find_element("id", "speakers").is_displayed()
    # A server that says it labels speakers but refuses: the checkbox goes, the session goes on.
    scripted.speakers, scripted.refuse = True, True
    driver.get(scripted.url + "/")
    t.wait_ready(driver)
    box = driver.find_element("id", "speakers")
    t.wait(driver, lambda d: box.is_displayed(), 10, "no Speakers checkbox")
    box.click()
    driver.find_element("id", "start").click()
    t.wait(driver, lambda d: not box.is_displayed(), 20, "the refusal left the checkbox")
    assert "cannot label speakers" in t.text(driver, "notice-text")
    assert scripted.configs[-1]["diarize"] is True
    driver.find_element("id", "stop").click()
    t.wait(driver, lambda d: t.text(d, "notice-text").startswith("Done:"), 20, "no done")


@pytest.mark.slow  # paced in real time: seconds of wall time
def test_kettle_server_labels_two_voices_on_the_page(
    fake_server: Callable[..., Any],
    open_browser: Callable[..., Any],
    page_tools: Any,
    make_mic_wav: Callable[[Path, int, Path], float],
    tmp_path: Path,
) -> None:
    """kettle's own server, the fake model and the pitch speaker encoder: two 'voices'."""
    import soundfile as sf
    from kettle.streaming.engine.speakers import SpeakerService
    from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
    from kettle.transcribe.speakers.fake import PitchSpeakerEncoder

    t = page_tools
    pattern = [("voice@140", 2.0), ("silence", 1.5), ("voice@230", 2.0), ("silence", 1.5)]
    sf.write(str(tmp_path / "two16k.wav"), scripted_audio(pattern), 16000, subtype="PCM_16")
    mic = tmp_path / "two48k.wav"
    duration = make_mic_wav(tmp_path / "two16k.wav", 48000, mic)
    srv = fake_server(FakeDecoder(name="fake"), speakers=SpeakerService(PitchSpeakerEncoder()))
    driver = open_browser(mic)
    driver.get(srv.url + "/")
    t.wait_ready(driver)
    box = driver.find_element("id", "speakers")
    t.wait(driver, lambda d: box.is_displayed(), 10, "no Speakers checkbox")
    box.click()
    t.record_clip(driver, duration)
    labels = [line[0] for line in driver.execute_script(LINES)]
    assert labels[:2] == ["Speaker 1", "Speaker 2"], labels
    assert not t.severe(driver)
