"""The page applies `revision` messages (docs/protocol.md#revision), in real headless Chromium.

A scripted server (the page's files plus a /v1/stream that plays a fixed script) sends what
kettle's server never would on its own: a revision for an utterance that has no final, and
one after `done`; the page must ignore both. It also checks what the eye and the ear get: the
line rewritten in place with the changed words marked and the mark gone after about 2 s,
no fade with reduced motion, a correction announced as what changed (not the whole line, not
the transcript again), and downloads that hold the refined text and times.
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


def _words(text: str, start: float, end: float) -> list[dict[str, Any]]:
    parts = text.split()
    step = (end - start) / len(parts)
    return [
        {"word": w, "start": round(start + i * step, 3), "end": round(start + (i + 1) * step, 3)}
        for i, w in enumerate(parts)
    ]


def _final(kind: str, n: int, start: float, end: float, text: str) -> str:
    return json.dumps(
        {
            "type": kind,
            "utterance": n,
            "start": start,
            "end": end,
            "text": text,
            "words": _words(text, start, end),
            "language": "en",
        }
    )


@dataclass
class Scripted:
    url: str
    configs: list[dict[str, Any]] = field(default_factory=list)
    sessions: int = 0


@pytest.fixture
def scripted_server() -> Iterator[Scripted]:
    """A stand-in for kettle with the page's files and a scripted /v1/stream.

    Once audio flows: final 0, final 1, a revision of 0, a revision of utterance 9 (never
    finalized). At `stop`: a revision of 1, `done`, then a revision of 0 after `done`.
    """
    from kettle.streaming.server.http_routes import PAGE_SECURITY_HEADERS
    from websockets.datastructures import Headers
    from websockets.http11 import Response
    from websockets.sync.server import ServerConnection, serve
    from websockets.typing import Subprotocol

    state = Scripted(url="")

    def files(conn: ServerConnection, request: Any) -> Any:
        path = request.path.split("?", 1)[0]
        if path == "/v1/stream":
            return None
        if path == "/v1/info":
            body = json.dumps(
                {
                    "ready": True,
                    "model": "scripted",
                    "multilingual": False,
                    "auth": {"required": False},
                }
            ).encode()
            return Response(200, "OK", Headers({"Content-Type": "application/json"}), body)
        if path == "/readyz":
            return Response(200, "OK", Headers({"Content-Type": "text/plain"}), b"ready\n")
        target = WEB_ROOT / ("index.html" if path == "/" else path.lstrip("/"))
        if target.suffix not in TYPES or not target.is_file():
            return Response(404, "Not Found", Headers({"Content-Type": "text/plain"}), b"")
        headers = Headers({"Content-Type": TYPES[target.suffix], **PAGE_SECURITY_HEADERS})
        return Response(200, "OK", headers, target.read_bytes())

    def session(ws: ServerConnection) -> None:
        state.sessions += 1
        ws.send(
            json.dumps(
                {
                    "type": "ready",
                    "session_id": "s",
                    "protocol": 1,
                    "model": "scripted",
                    "sample_rate": 16000,
                }
            )
        )
        audio = 0
        scripted = False
        for message in ws:
            if isinstance(message, bytes):
                audio += len(message)
                if not scripted and audio >= 16000:  # half a second of s16le at 16 kHz
                    scripted = True
                    ws.send(_final("final", 0, 0.5, 1.6, "alpha bravo charlie"))
                    time.sleep(0.2)
                    ws.send(_final("final", 1, 2.0, 3.0, "india juliet kilo"))
                    time.sleep(0.2)
                    ws.send(_final("revision", 0, 0.44, 1.7, "alfa bravo charlie"))
                    ws.send(_final("revision", 9, 5.0, 6.0, "never finalized"))
                continue
            msg = json.loads(message)
            if msg.get("type") == "config":
                state.configs.append(msg)
            elif msg.get("type") == "stop":
                ws.send(_final("revision", 1, 2.0, 3.25, "india juliett kilo"))
                ws.send(
                    json.dumps({"type": "done", "audio_seconds": audio / 32000, "utterances": 2})
                )
                ws.send(_final("revision", 0, 0.0, 9.0, "too late"))
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


# Records every mark a revision puts on a word (with its animation) and every announcement.
MARKS = """
window.__rev = {marks: [], announced: []};
new MutationObserver((records) => {
  for (const r of records) for (const n of r.addedNodes) {
    if (n.nodeType !== 1) continue;
    if (n.matches('.revised')) window.__rev.marks.push({
      word: n.textContent, animation: getComputedStyle(n).animationName, at: performance.now()});
    if (n.parentElement && n.parentElement.id === 'announcer')
      window.__rev.announced.push(n.textContent);
  }
}).observe(document.body, {subtree: true, childList: true});
"""


def test_revisions_rewrite_lines_in_place_and_the_downloads(
    scripted_server: Scripted,
    open_browser: Callable[..., Any],
    page_tools: Any,
    artifacts_dir: Path,
    tmp_path: Path,
) -> None:
    t = page_tools
    driver = open_browser()
    driver.get(scripted_server.url + "/")
    t.wait_ready(driver)
    assert (
        driver.execute_script("return document.getElementById('finals').getAttribute('aria-live')")
        is None
    )
    driver.execute_script(MARKS)
    lines = "return [...document.querySelectorAll('#finals li .text')].map(e => e.textContent)"
    driver.find_element("id", "start").click()

    t.wait(
        driver,
        lambda d: d.execute_script(lines)[:1] == ["alfa bravo charlie"],
        20,
        "no revision of line 0",
    )
    assert driver.execute_script(lines) == ["alfa bravo charlie", "india juliet kilo"]
    driver.save_screenshot(str(artifacts_dir / "web-page-revision.png"))
    marks = driver.execute_script("return window.__rev.marks")
    assert [(m["word"], m["animation"]) for m in marks] == [("alfa", "revised-fade")], marks
    assert (
        driver.execute_script("return document.querySelector('#finals li time').textContent")
        == "0:00.4"
    )
    # The mark goes after about 2 s; the line's text stays.
    t.wait(
        driver,
        t.js("return !document.querySelector('#finals .revised')"),
        5,
        "the mark of the changed word did not go",
    )
    marked_for = driver.execute_script("return performance.now()") - marks[0]["at"]
    assert 1500 <= marked_for <= 4500, marked_for
    assert driver.execute_script(lines)[0] == "alfa bravo charlie"

    # With reduced motion the mark does not fade: it shows still, then goes.
    driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-reduced-motion", "value": "reduce"}]},
    )
    driver.find_element("id", "stop").click()
    t.wait(driver, lambda d: t.text(d, "notice-text").startswith("Done:"), 20, "no done")
    time.sleep(0.5)  # the revision after `done` has had time to arrive, and must not show
    assert driver.execute_script(lines) == ["alfa bravo charlie", "india juliett kilo"]
    marks = driver.execute_script("return window.__rev.marks")
    assert [(m["word"], m["animation"]) for m in marks][1:] == [("juliett", "none")], marks

    announced = driver.execute_script("return window.__rev.announced")
    assert announced == [
        "alpha bravo charlie",
        "india juliet kilo",
        "Correction at 0:00.4: alpha to alfa.",
        "Correction at 0:02.0: juliet to juliett.",
    ], announced
    # The hidden announcer keeps only its last few entries: browsing finds few duplicates.
    assert (
        driver.execute_script("return document.getElementById('announcer').childElementCount") <= 3
    )
    assert scripted_server.configs and scripted_server.configs[0]["revisions"] is True
    assert scripted_server.configs[0]["word_timestamps"] is True

    downloads = tmp_path / "downloads"
    driver.find_element("id", "download-txt").click()
    assert t.read_download(downloads, ".txt") == "alfa bravo charlie\nindia juliett kilo\n"
    driver.find_element("id", "download-srt").click()
    assert t.read_download(downloads, ".srt") == (
        "1\n00:00:00,440 --> 00:00:01,700\nalfa bravo charlie\n\n"
        "2\n00:00:02,000 --> 00:00:03,250\nindia juliett kilo\n"
    )
    assert scripted_server.sessions == 1
    assert not t.severe(driver)


SPEECH = "audio/ls__2830-3980-0043.wav"  # 2 s of read speech: the fake model needs voiced audio
GAP_S = 1.5  # silence between the two utterances: well over the server's endpoint silence
# Runs before the page's own scripts: keeps every text message the page's WebSockets receive.
WS_LOG = """
window.__ws = [];
const Native = window.WebSocket;
window.WebSocket = class extends Native {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', (e) => {
      if (typeof e.data === 'string') window.__ws.push(JSON.parse(e.data));
    });
  }
};
"""


def _expected(messages: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The transcript the messages make: each final, replaced by its latest revision."""
    lines: dict[int, dict[str, Any]] = {}
    done = False
    for m in messages:
        revises = m["type"] == "revision" and not done and m["utterance"] in lines
        if m["type"] == "final" or revises:
            lines[m["utterance"]] = m
        done = done or m["type"] == "done"
    return lines


def _brought(messages: list[dict[str, Any]]) -> list[str]:
    """The words each revision brought that the text it replaced lacked, in order."""
    import difflib

    texts: dict[int, list[str]] = {}
    brought: list[str] = []
    for m in messages:
        if m["type"] not in ("final", "revision"):
            continue
        new = m["text"].split()
        old = texts.get(m["utterance"])
        if m["type"] == "revision" and old is not None:
            ops = difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
            brought += [w for tag, _, _, j1, j2 in ops if tag != "equal" for w in new[j1:j2]]
        texts[m["utterance"]] = new
    return brought


def _srt_time(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 3600000:02}:{ms // 60000 % 60:02}:{ms // 1000 % 60:02},{ms % 1000:03}"


@pytest.mark.slow  # paced in real time: seconds of wall time
def test_kettle_server_revisions_replace_text_on_the_page(
    fake_server: Callable[..., Any],
    open_browser: Callable[..., Any],
    page_tools: Any,
    eval_clip: Callable[[str], Any],
    make_mic_wav: Callable[[Path, int, Path], float],
    tmp_path: Path,
) -> None:
    """kettle's own server with the fake model, whose refinement spells "alpha" as "alfa".

    Two utterances, each beginning with "alpha" in the fake model's words: the first is
    revised once the second has been heard. (Whether the last one is revised at Stop is the
    server's choice; the page must show whatever it was sent, so the test compares the page
    with the messages the page received.)
    """
    import numpy as np
    import soundfile as sf
    from kettle.transcribe.audio.read import load_audio
    from kettle.transcribe.model.fake import FakeDecoder

    t = page_tools
    speech = load_audio(eval_clip(SPEECH).path)
    twice = np.concatenate([speech, np.zeros(int(GAP_S * 16000), np.float32), speech])
    sf.write(str(tmp_path / "twice16k.wav"), twice, 16000, subtype="PCM_16")
    mic = tmp_path / "twice48k.wav"
    duration = make_mic_wav(tmp_path / "twice16k.wav", 48000, mic)
    srv = fake_server(FakeDecoder(name="fake"))
    driver = open_browser(mic)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WS_LOG})
    driver.get(srv.url + "/")
    t.wait_ready(driver)
    driver.execute_script(MARKS)
    info = t.record_clip(driver, duration)
    messages = driver.execute_script("return window.__ws")
    print("page:", json.dumps(info, indent=1))
    print("received:", json.dumps([{k: v for k, v in m.items() if k != "words"} for m in messages]))

    revisions = [m for m in messages if m["type"] == "revision"]
    assert revisions, "the server sent no revision"
    assert all(m["words"] for m in revisions), "a revision came without its words"
    first = revisions[0]
    assert first["utterance"] == 0 and first["text"].split()[0] == "alfa", first
    expected = _expected(messages)
    assert len(expected) == 2, expected
    assert info["finals"] == [m["text"] for _, m in sorted(expected.items())]
    assert info["finals"][0].split()[0] == "alfa"  # replaced in place: still the first line
    # The marks are the words each revision brought. (The fake model counts voiced frames
    # across the pause, so a refinement may also gain a word that the final lacked.)
    marks = driver.execute_script("return window.__rev.marks")
    assert [m["word"] for m in marks] == _brought(messages), marks
    assert marks[0]["word"] == "alfa", marks
    announced = driver.execute_script("return window.__rev.announced")
    corrections = [a for a in announced if a.startswith("Correction")]
    assert len(corrections) == len(revisions), announced
    assert corrections[0].startswith(f"Correction at {info['times'][0]}: alpha to alfa"), announced

    downloads = tmp_path / "downloads"
    driver.find_element("id", "download-txt").click()
    assert t.read_download(downloads, ".txt").splitlines() == info["finals"]
    driver.find_element("id", "download-srt").click()
    cues = t.read_download(downloads, ".srt").strip().split("\n\n")
    assert cues == [
        f"{i}\n{_srt_time(m['start'])} --> {_srt_time(m['end'])}\n{m['text']}"
        for i, (_, m) in enumerate(sorted(expected.items()), start=1)
    ], cues
    assert not t.severe(driver)
