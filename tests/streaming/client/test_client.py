"""`kettle serve` as a process (ready line, auth, Ctrl-C) and the `kettle stream` client."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kettle.streaming.client.client import ClientOptions, Printer, StreamClientError, stream_audio
from kettle.transcribe.model.fake import scripted_audio

AUDIO = scripted_audio([("voice", 1.5), ("silence", 1.0), ("voice", 1.5), ("silence", 0.8)])


def _kettle(*args: str) -> list[str]:
    return [sys.executable, "-m", "kettle.streaming.cli.main", *args]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`kettle serve --fake-model --port 0` with API keys from the environment, a key file
    and the command line."""
    env = dict(os.environ, KETTLE_API_KEYS="env-key, other-key")
    key_file = tmp_path / "keys.txt"
    key_file.write_text("# kettle keys\nfile-key\n")
    proc = subprocess.Popen(
        # -vv: even debug logging must not reveal a key
        _kettle(
            "-vv",
            "serve",
            "--fake-model",
            "--port",
            "0",
            "--api-key",
            "cli-key",
            "--api-key-file",
            str(key_file),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.fullmatch(r"kettle serving on (http://127\.0\.0\.1:\d+)\n", line)
        assert match, (
            f"unexpected first line {line!r}; stderr: {proc.stderr.read() if proc.stderr else ''}"
        )
        yield proc, match.group(1)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def test_serve_prints_ready_line_and_stops_on_sigint(
    served: tuple[subprocess.Popen[str], str], tmp_path: Path
) -> None:
    proc, url = served
    with urllib.request.urlopen(url + "/readyz", timeout=10) as response:
        assert response.status == 200
    ws_url = url.replace("http", "ws") + "/v1/stream"

    async def scenario() -> None:
        # keys from --api-key, the key file and KETTLE_API_KEYS all work; no key is refused
        with pytest.raises(StreamClientError, match="401"):
            await stream_audio(AUDIO, ClientOptions(url=ws_url))
        done = await stream_audio(AUDIO, ClientOptions(url=ws_url, api_key="other-key"))
        assert len(done.finals) == 2 and done.close_code == 1000
        from_file = await stream_audio(AUDIO, ClientOptions(url=ws_url, api_key="file-key"))
        assert len(from_file.finals) == 2
        # a session in flight at Ctrl-C gets its finals, then 1001 (SIGTERM drains: test_drain)
        first_partial = asyncio.Event()

        def on_message(message: dict[str, object], _at: float) -> None:
            if message["type"] == "partial":
                first_partial.set()

        live = asyncio.create_task(
            stream_audio(
                AUDIO,
                # No reconnect: this is about what the stopping server sends.
                ClientOptions(
                    url=ws_url, api_key="cli-key", realtime=True, chunk_ms=100, reconnects=0
                ),
                on_message,
            )
        )
        await asyncio.wait_for(first_partial.wait(), 30)  # mid-utterance now
        proc.send_signal(signal.SIGINT)
        result = await live
        assert result.close_code == 1001
        assert result.done is not None and result.done.get("reason") == "shutdown"
        assert [f["utterance"] for f in result.finals] == list(range(len(result.finals)))
        assert len(result.finals) >= 1

    asyncio.run(scenario())
    assert proc.wait(20) == 0
    assert proc.stderr is not None
    log = proc.stderr.read()
    assert "cli-key" not in log and "env-key" not in log and "other-key" not in log
    assert "file-key" not in log
    assert "prefer --api-key-file" in log  # --api-key shows in ps: the user is told


@pytest.mark.slow  # paced in real time (--realtime): seconds of wall time
def test_stream_command_prints_finals(
    served: tuple[subprocess.Popen[str], str], tmp_path: Path
) -> None:
    proc, url = served
    import soundfile as sf

    wav = tmp_path / "speech.wav"
    sf.write(wav, AUDIO, 16000)
    ws_url = url.replace("http", "ws") + "/v1/stream"
    out = subprocess.run(
        _kettle("stream", str(wav), "--url", ws_url, "--api-key", "cli-key"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    span = r"\[0:\d\d\.\d{3} -> 0:\d\d\.\d{3}\]"
    # revisions (asked for by default) are their own lines, marked '~'
    finals = [ln for ln in out.stdout.splitlines() if not ln.startswith("~ ")]
    revisions = [ln for ln in out.stdout.splitlines() if ln.startswith("~ ")]
    assert len(finals) == 2 and all(re.match(span + r" \w", ln) for ln in finals)
    assert all(re.match("~ " + span + r" alfa", ln) for ln in revisions)
    assert f"2 utterance(s) ({len(revisions)} revised)" in out.stderr
    plain = subprocess.run(
        _kettle("stream", str(wav), "--url", ws_url, "--api-key", "cli-key", "--no-revisions"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.splitlines() == finals and "revised" not in plain.stderr
    as_json = subprocess.run(
        _kettle("stream", str(wav), "--url", ws_url, "--json", "--realtime", "--chunk-ms", "200"),
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, KETTLE_API_KEY="env-key"),
    )
    assert as_json.returncode == 0, as_json.stderr
    messages = [json.loads(line) for line in as_json.stdout.splitlines()]
    kinds = [m["type"] for m in messages]
    assert kinds[0] == "ready" and kinds[-1] == "done" and "partial" in kinds
    refused = subprocess.run(
        _kettle("stream", str(wav), "--url", ws_url), capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2 and "HTTP 401" in refused.stderr
    missing = subprocess.run(
        _kettle("stream", str(tmp_path / "nope.wav"), "--url", ws_url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "nope.wav" in missing.stderr
    assert "Traceback" not in missing.stderr + refused.stderr
    proc.send_signal(signal.SIGINT)
    assert proc.wait(20) == 0


def test_printer_overwrites_partials_on_a_terminal() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = Printer(out, err, as_json=False, tty=True)
    printer({"type": "ready"}, 0.0)
    printer({"type": "partial", "text": "hello", "utterance": 0}, 0.0)
    printer({"type": "partial", "text": "hello world", "utterance": 0}, 0.0)
    printer({"type": "final", "text": " Hello world.", "start": 1.5, "end": 62.25}, 0.0)
    printer({"type": "error", "code": "bad_audio", "message": "too big"}, 0.0)
    printer.finish()
    assert out.getvalue() == (
        "\r\x1b[Khello\r\x1b[Khello world\r\x1b[K[0:01.500 -> 1:02.250] Hello world.\n"
    )
    assert "bad_audio" in err.getvalue()


def test_printer_without_terminal_prints_finals_only() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = Printer(out, err, as_json=False, tty=False)
    printer({"type": "partial", "text": "hello", "utterance": 0}, 0.0)
    printer({"type": "final", "text": "Hello.", "start": 0.0, "end": 1.0}, 0.0)
    assert out.getvalue() == "[0:00.000 -> 0:01.000] Hello.\n"


def test_client_options_validation() -> None:
    with pytest.raises(ValueError):
        ClientOptions(url="http://x")
    with pytest.raises(ValueError):
        ClientOptions(chunk_ms=1)


def test_serve_reports_a_busy_port(served: tuple[subprocess.Popen[str], str]) -> None:
    _, url = served
    port = url.rsplit(":", 1)[1]
    out = subprocess.run(
        _kettle("serve", "--fake-model", "--port", port),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and out.stdout == ""
    assert "cannot listen" in out.stderr and "Traceback" not in out.stderr
    bad = subprocess.run(
        _kettle("serve", "--fake-model", "--tls-cert", "x.pem"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "TLS needs both" in bad.stderr
