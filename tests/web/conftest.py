"""Fixtures for the browser tests: Chromium through chromedriver, a fake microphone, servers.

Test modules run with --import-mode=importlib and cannot import each other, so the helpers
are handed out as fixtures (most of them return a function).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts"
LEAD_S, TRAIL_S = 0.5, 1.5
SERVER_START_TIMEOUT_S = 120.0


def _find(env: str, *names: str) -> str | None:
    if os.environ.get(env):
        return os.environ[env]
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="session")
def browser_paths() -> tuple[str, str]:
    """(chromium, chromedriver); fails, naming what to install, when one is missing.

    A failure rather than a skip, so a run that left the page untested does not look green;
    `-m "not browser"` deselects these tests on a machine without a browser.
    """
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.fail('selenium is not installed: pip install -e ".[dev]"')
    chromium = _find("KETTLE_CHROMIUM", "chromium", "chromium-browser")
    driver = _find("KETTLE_CHROMEDRIVER", "chromedriver")
    if not chromium or not driver:
        pytest.fail(
            "chromium and chromedriver are not installed: apt-get install chromium "
            "chromium-driver (.ci/run does), or deselect with -m 'not browser'"
        )
    return chromium, driver


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """test-artifacts/ at the repo root (git-ignored): screenshots for people to look at."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def open_browser(browser_paths: tuple[str, str], tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """open_browser(mic_wav=None, fake_ui=True) -> a selenium driver; all quit at teardown.

    Downloads go to tmp_path/downloads. `mic_wav` plays as the microphone, once, from the
    moment the page calls getUserMedia. `fake_ui=False` leaves permission decisions to the
    test (the permission-denied case).
    """
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    drivers: list[Any] = []
    downloads = tmp_path / "downloads"
    downloads.mkdir(exist_ok=True)

    def launch(mic_wav: Path | None = None, fake_ui: bool = True) -> Any:
        chromium, chromedriver = browser_paths
        opts = Options()
        opts.binary_location = chromium
        flags = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / f'profile{len(drivers)}'}",
            "--use-fake-device-for-media-stream",
            "--autoplay-policy=no-user-gesture-required",
            "--window-size=1280,900",
        ]
        if fake_ui:
            flags.append("--use-fake-ui-for-media-stream")
        if mic_wav is not None:
            flags.append(f"--use-file-for-fake-audio-capture={mic_wav}%noloop")
        for flag in flags:
            opts.add_argument(flag)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        opts.add_experimental_option(
            "prefs",
            {"download.default_directory": str(downloads), "download.prompt_for_download": False},
        )
        # An explicit driver path: Selenium Manager never looks for one on the network.
        driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=opts)
        drivers.append(driver)
        driver.execute_cdp_cmd(
            "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
        )
        return driver

    yield launch
    for driver in drivers:
        with contextlib.suppress(Exception):
            driver.quit()


@pytest.fixture(scope="session")
def make_mic_wav() -> Callable[[Path, int, Path], float]:
    """make_mic_wav(clip, rate, out) -> seconds: 16-bit mono WAV at `rate`, padded with silence."""

    def make(clip: Path, rate: int, out: Path) -> float:
        import soundfile as sf
        import soxr
        from kettle.transcribe.audio.read import load_audio

        try:
            audio, sr = sf.read(str(clip), dtype="float32", always_2d=True)
            mono = audio.mean(axis=1)
        except Exception:  # formats libsndfile cannot read (raw, opus): kettle's own reader
            mono, sr = load_audio(clip), 16000
        if sr != rate:
            mono = soxr.resample(mono, sr, rate)
        padded = np.concatenate(
            [
                np.zeros(int(LEAD_S * rate), np.float32),
                np.asarray(mono, np.float32),
                np.zeros(int(TRAIL_S * rate), np.float32),
            ]
        )
        sf.write(str(out), padded, rate, subtype="PCM_16")
        return len(padded) / rate

    return make


@dataclass
class ServeProcess:
    url: str
    process: subprocess.Popen[bytes]
    log: Path


@contextlib.contextmanager
def _kettle_serve(log: Path, *args: str) -> Iterator[ServeProcess]:
    cmd = [sys.executable, "-m", "kettle.streaming.cli.main", "serve", "--port", "0", *args]
    with open(log, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, cwd=REPO_ROOT)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            readable, _, _ = select.select([proc.stdout], [], [], max(0.0, left))
            if not readable:
                pytest.fail(f"kettle serve printed no ready line in time:\n{log.read_text()}")
            chunk = proc.stdout.readline()
            if not chunk:
                pytest.fail(f"kettle serve exited ({proc.wait()}):\n{log.read_text()}")
            line += chunk
        match = re.fullmatch(r"kettle serving on (http://127\.0\.0\.1:\d+)", line.decode().strip())
        assert match, f"unexpected ready line {line!r}"
        yield ServeProcess(match.group(1), proc, log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout:
            proc.stdout.close()


@pytest.fixture(scope="session")
def kettle_serve() -> Callable[..., contextlib.AbstractContextManager[ServeProcess]]:
    """kettle_serve(log_path, *args): `kettle serve --port 0 *args` as a context manager.

    Yields once the ready line is printed (with .url, .process, .log); SIGTERM at exit. A
    later `--port N` in args overrides the 0.
    """
    return _kettle_serve


@dataclass
class InProcessServer:
    url: str
    server: Any
    decoder: Any


@pytest.fixture
def fake_server() -> Iterator[Callable[..., InProcessServer]]:
    """fake_server(decoder, speakers=None, **config) -> a KettleServer on 127.0.0.1:0 in a
    background thread (``speakers``: a SpeakerService, for diarize).

    For the page's reactions to server states (full, multilingual) with a fake model; the
    real `kettle serve` is what the e2e tests use.
    """
    from kettle.streaming.server.server import KettleServer, ServerConfig

    started: list[tuple[asyncio.AbstractEventLoop, threading.Thread, Any]] = []

    def start(decoder: Any, speakers: Any = None, **config: Any) -> InProcessServer:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        server = KettleServer(
            ServerConfig(host="127.0.0.1", port=0, **config), lambda: decoder, speakers=speakers
        )
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(60)
        started.append((loop, thread, server))
        return InProcessServer(server.url, server, decoder)

    yield start
    for loop, thread, server in started:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(server.shutdown(5.0), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


# Runs in the page: records when partial and final text first appear, every partial and every
# notice (a MutationObserver sees each change, however short-lived; polling could miss some).
OBSERVER = """
window.__e2e = {firstPartialMs: null, firstFinalMs: null, partials: [], notices: []};
new MutationObserver(() => {
  const e = window.__e2e, now = performance.now();
  const notice = document.getElementById('notice-text').textContent;
  if (notice && e.notices[e.notices.length - 1] !== notice) e.notices.push(notice);
  const partial = document.getElementById('partial').textContent.trim();
  if (partial) {
    if (e.firstPartialMs === null) e.firstPartialMs = now;
    if (e.partials[e.partials.length - 1] !== partial) e.partials.push(partial);
  }
  if (e.firstFinalMs === null && document.querySelector('#finals li')) e.firstFinalMs = now;
}).observe(document.body, {subtree: true, childList: true, characterData: true});
"""


@pytest.fixture(scope="session")
def page_tools() -> Any:
    """Helpers that drive the page: wait, observe, record a clip, read console errors."""
    return PageTools()


class PageTools:
    observer = OBSERVER

    @staticmethod
    def wait(driver: Any, condition: Callable[[Any], Any], timeout: float, message: str) -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition, message)

    @staticmethod
    def js(script: str) -> Callable[[Any], Any]:
        return lambda d: d.execute_script(script)

    @staticmethod
    def text(driver: Any, element_id: str) -> str:
        return str(
            driver.execute_script(f"return document.getElementById('{element_id}').textContent")
        )

    @staticmethod
    def severe(driver: Any) -> list[dict[str, Any]]:
        """SEVERE console entries since the last call (reading the log clears it)."""
        return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]

    def wait_ready(self, driver: Any, timeout: float = 30) -> None:
        self.wait(
            driver,
            lambda d: self.text(d, "state-text") == "Ready",
            timeout,
            "the page did not report the server ready",
        )

    def record_clip(
        self,
        driver: Any,
        duration_s: float,
        live_shot: Path | None = None,
        during: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """Start by keyboard, let the fake mic play the whole file, Stop, wait for `done`.

        `live_shot`: a screenshot while a partial shows stable words and an unstable tail.
        `during`: runs once the first partial is shown (e.g. to break the server).
        """
        from selenium.common.exceptions import TimeoutException
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        driver.execute_script(self.observer)
        start = driver.find_element(By.ID, "start")
        driver.execute_script("arguments[0].focus()", start)
        assert driver.execute_script("return document.activeElement.id") == "start"
        start.send_keys(Keys.ENTER)  # a real button: Enter activates it
        self.wait(
            driver,
            self.js("return document.getElementById('state').dataset.state === 'live'"),
            30,
            "the page never went live",
        )
        if live_shot is not None:
            # Best effort: a screenshot is for people to look at, not a condition of the test.
            with contextlib.suppress(TimeoutException):
                self.wait(
                    driver,
                    self.js(
                        "return !!document.querySelector("
                        "'#partial .stable:not(:empty) ~ .unstable:not(:empty)')"
                    ),
                    duration_s,
                    "no partial with both stable words and an unstable tail",
                )
            driver.save_screenshot(str(live_shot))
        if during is not None:
            self.wait(
                driver,
                self.js("return window.__e2e.firstPartialMs !== null"),
                duration_s + 30,
                "no partial was shown",
            )
            during()
        # The audio clock shown by the page reaches the file's length once it has all played.
        self.wait(
            driver,
            self.js(
                "const [m, s] = document.getElementById('audio-time').textContent.split(':');"
                f"return 60 * Number(m) + Number(s) >= {duration_s - 0.2};"
            ),
            duration_s * 3 + 30,
            "the fake microphone did not deliver the whole file",
        )
        driver.find_element(By.ID, "stop").click()
        self.wait(
            driver,
            lambda d: self.text(d, "notice-text").startswith("Done:"),
            90,
            "no `done` after Stop",
        )
        assert (
            driver.execute_script("return document.getElementById('state').dataset.state") == "idle"
        )
        info: dict[str, Any] = driver.execute_script(
            "return Object.assign({}, window.__e2e, {"
            " finals: [...document.querySelectorAll('#finals li .text')].map(e => e.textContent),"
            " times: [...document.querySelectorAll('#finals li time')].map(e => e.textContent),"
            " capture: document.getElementById('capture-rate').textContent,"
            " partialLag: document.getElementById('partial-lag').textContent,"
            " finalLag: document.getElementById('final-lag').textContent,"
            " done: document.getElementById('notice-text').textContent})"
        )
        return info

    @staticmethod
    def read_download(folder: Path, suffix: str, timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # the browser writes the file; nothing to await
            # Chromium may create the file before it writes it: wait for content.
            done = [p for p in folder.glob(f"*{suffix}") if p.is_file() and p.stat().st_size]
            if done:
                return done[0].read_text(encoding="utf-8")
            time.sleep(0.1)
        pytest.fail(f"no {suffix} download in {folder}: {sorted(folder.iterdir())}")
