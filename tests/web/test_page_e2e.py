"""The microphone page end to end: real headless Chromium, real `kettle serve`, real tiny.en.

Chromium's fake capture device plays an eval recording as the microphone (it starts when the
page calls getUserMedia and runs in real time); the page resamples it in its AudioWorklet,
streams it, and shows partials and finals. Screenshots land in test-artifacts/ at the repo root.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts"
API_KEY = "e2e-secret-key"
# Long enough for several partials before the utterance ends; clean read speech.
MAIN_CLIP = "audio/ls__1089-134686-0000.flac"
SHORT_CLIP = "audio/ls__1272-128104-0000.wav"
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


@pytest.fixture(scope="module")
def browser_paths() -> tuple[str, str]:
    pytest.importorskip("selenium", reason="selenium is not installed (pip install selenium)")
    chromium = _find("KETTLE_CHROMIUM", "chromium", "chromium-browser")
    driver = _find("KETTLE_CHROMEDRIVER", "chromedriver")
    if not chromium or not driver:
        pytest.skip("chromium and chromedriver are not installed (apt install chromium chromium-driver)")
    return chromium, driver


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Path


@contextlib.contextmanager
def kettle_serve(log: Path, *args: str) -> Iterator[Server]:
    """`kettle serve --port 0` in a subprocess; yields once it printed its ready line."""
    cmd = [sys.executable, "-m", "kettle.streaming.cli", "serve", "--port", "0", *args]
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
        yield Server(match.group(1), proc, log)
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


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, browser_paths: Any) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("kettle-serve") / "stderr.log"
    with kettle_serve(log, "--api-key", API_KEY) as srv:
        yield srv


def make_mic_wav(clip: Path, rate: int, out: Path) -> float:
    """The clip as 16-bit mono WAV at `rate` with leading and trailing silence; its duration."""
    import soundfile as sf
    import soxr

    audio, sr = sf.read(str(clip), dtype="float32", always_2d=True)
    mono = audio.mean(axis=1)
    if sr != rate:
        mono = soxr.resample(mono, sr, rate)
    padded = np.concatenate(
        [np.zeros(int(LEAD_S * rate), np.float32), mono, np.zeros(int(TRAIL_S * rate), np.float32)]
    )
    sf.write(str(out), padded, rate, subtype="PCM_16")
    return len(padded) / rate


def open_browser(paths: tuple[str, str], mic_wav: Path, downloads: Path, profile: Path) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = paths
    opts = Options()
    opts.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={mic_wav}%noloop",
        "--autoplay-policy=no-user-gesture-required",
        "--window-size=1280,900",
    ):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    opts.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    # An explicit driver path: Selenium Manager never looks for one on the network.
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=opts)
    driver.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    return driver


def wait_for(driver: Any, condition: Any, timeout: float, message: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition, message)


def js_true(script: str) -> Any:
    return lambda d: d.execute_script(script)


# Records, in the page, when partial and final text first appear (a MutationObserver sees
# every change, however short-lived, which polling from the test could miss).
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


def severe(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry.get("level") == "SEVERE"]


def read_download(folder: Path, suffix: str, timeout: float = 15.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # the browser writes the file; nothing to await
        done = [p for p in folder.glob(f"*{suffix}") if p.is_file()]
        if done:
            return done[0].read_text(encoding="utf-8")
        time.sleep(0.1)
    pytest.fail(f"no {suffix} download in {folder}: {list(folder.iterdir())}")


def record_clip(
    driver: Any,
    duration_s: float,
    live_shot: Path | None = None,
    during: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Start by keyboard, let the fake mic play the whole file, Stop, wait for `done`.

    `during` runs once the first partial is shown (the reconnect test breaks the server there).
    """
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.keys import Keys

    driver.execute_script(OBSERVER)
    start = driver.find_element(By.ID, "start")
    driver.execute_script("arguments[0].focus()", start)
    assert driver.execute_script("return document.activeElement.id") == "start"
    start.send_keys(Keys.ENTER)  # a real button: Enter activates it
    wait_for(driver, js_true("return document.getElementById('state').dataset.state === 'live'"),
             30, "the page never went live")
    if live_shot is not None:
        # Mid-utterance: a partial with its lighter unstable tail, the level meter moving.
        # Best effort: a screenshot is for people to look at, not a condition of the test.
        with contextlib.suppress(TimeoutException):
            wait_for(
                driver,
                js_true("return !!document.querySelector("
                        "'#partial .stable:not(:empty) ~ .unstable:not(:empty)')"),
                duration_s, "no partial with both stable words and an unstable tail",
            )
        driver.save_screenshot(str(live_shot))
    if during is not None:
        wait_for(driver, js_true("return window.__e2e.firstPartialMs !== null"), duration_s + 30,
                 "no partial was shown")
        during()
    # The audio clock shown by the page reaches the file's length once it has all played.
    wait_for(
        driver,
        js_true(
            "const [m, s] = document.getElementById('audio-time').textContent.split(':');"
            f"return 60 * Number(m) + Number(s) >= {duration_s - 0.2};"
        ),
        duration_s * 3 + 30,
        "the fake microphone did not deliver the whole file",
    )
    driver.find_element(By.ID, "stop").click()
    wait_for(
        driver,
        js_true("return document.getElementById('notice-text').textContent.startsWith('Done:')"),
        90,
        "no `done` after Stop",
    )
    assert driver.execute_script("return document.getElementById('state').dataset.state") == "idle"
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


def clip_by_file(eval_clips: list[Any], name: str) -> Any:
    clip = next((c for c in eval_clips if c.path.as_posix().endswith(name)), None)
    if clip is None:
        pytest.skip(f"{name} is not in the eval set")
    return clip


def test_page_transcribes_the_microphone(
    server: Server,
    browser_paths: tuple[str, str],
    eval_clips: list[Any],
    wer_fn: Any,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    clip = clip_by_file(eval_clips, MAIN_CLIP)
    mic = tmp_path / "mic48k.wav"
    duration = make_mic_wav(clip.path, 48000, mic)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    driver = open_browser(browser_paths, mic, downloads, tmp_path / "profile")
    try:
        driver.get(server.url + "/")
        # The server wants a key: the page finds out by itself and asks for one.
        key = wait_for(driver, lambda d: d.find_element(By.ID, "api-key").is_displayed() and
                       d.find_element(By.ID, "api-key"), 20, "no key field on a keyed server")
        assert "needs an API key" in driver.find_element(By.ID, "notice-text").text
        key.send_keys("wrong-key")
        driver.execute_script("arguments[0].dispatchEvent(new Event('change'))", key)
        wait_for(driver, lambda d: "refused" in d.find_element(By.ID, "notice-text").text, 20,
                 "a wrong key was not reported as refused")
        key.clear()
        key.send_keys(API_KEY)
        driver.execute_script("arguments[0].dispatchEvent(new Event('change'))", key)
        wait_for(driver, lambda d: d.find_element(By.ID, "state-text").text == "Ready", 20,
                 "the right key was not accepted")
        # A refused handshake is logged by the browser itself (the WebSocket failure and the
        # 401 of the diagnosis probe); anything else severe is a bug in the page.
        for entry in severe(driver.get_log("browser")):
            assert re.search(r"WebSocket connection|status of 401", entry["message"]), entry
        assert "tiny.en" in driver.find_element(By.ID, "model").text
        assert not driver.find_element(By.ID, "lang-row").is_displayed()  # English-only model

        ARTIFACTS.mkdir(exist_ok=True)
        info = record_clip(driver, duration, live_shot=ARTIFACTS / "web-page-live.png")
        print("page:", json.dumps(info, indent=1))
        hypothesis = " ".join(info["finals"])
        error = wer_fn([clip.reference], [hypothesis])
        print(f"WER {error:.3f}: {hypothesis!r}")
        assert info["firstPartialMs"] is not None, "no partial was shown"
        assert info["firstFinalMs"] is not None, "no final was shown"
        assert info["firstPartialMs"] < info["firstFinalMs"], "the first final came before any partial"
        assert error <= 0.25, f"WER {error:.3f} for {hypothesis!r}"
        assert all(re.fullmatch(r"\d+:\d\d\.\d", t) for t in info["times"]), info["times"]
        assert re.fullmatch(r"\d+(\.\d)? → 16 kHz", info["capture"]), info["capture"]
        assert re.match(r"\d+\.\d\d s", info["partialLag"]) and re.match(r"\d+\.\d\d s", info["finalLag"])

        driver.find_element(By.ID, "download-txt").click()
        text = read_download(downloads, ".txt")
        assert text.splitlines() == info["finals"]
        driver.find_element(By.ID, "download-srt").click()
        srt = read_download(downloads, ".srt")
        cues = srt.strip().split("\n\n")
        assert len(cues) == len(info["finals"])
        for i, (cue, final) in enumerate(zip(cues, info["finals"], strict=True), start=1):
            number, timing, body = cue.split("\n", 2)
            assert number == str(i)
            assert re.fullmatch(r"\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}", timing)
            assert body == final

        # Everything came from the kettle server itself: no CDN, no other host.
        resources = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
        assert all(r.startswith(server.url) for r in resources), resources
        assert not severe(driver.get_log("browser"))

        driver.save_screenshot(str(ARTIFACTS / "web-page-desktop.png"))
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": 375, "height": 1100, "deviceScaleFactor": 1, "mobile": True},
        )
        overflow = driver.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        driver.save_screenshot(str(ARTIFACTS / "web-page-375px.png"))
        assert overflow <= 0, f"the page scrolls sideways at 375 px by {overflow} px"
    finally:
        driver.quit()


def test_page_at_the_other_capture_rate(
    server: Server,
    browser_paths: tuple[str, str],
    eval_clips: list[Any],
    wer_fn: Any,
    tmp_path: Path,
) -> None:
    """The worklet at the rate the browser does not use by itself (44.1 vs 48 kHz).

    Headless Chromium here opens its AudioContext at 44.1 kHz (no audio device); the page's
    capture_rate query forces the other one, so both resampling ratios run in a real browser.
    """
    from selenium.webdriver.common.by import By

    clip = clip_by_file(eval_clips, SHORT_CLIP)
    probe = open_browser(browser_paths, Path("/dev/null"), tmp_path / "dl0", tmp_path / "p0")
    try:
        probe.get(server.url + "/healthz")
        native = int(probe.execute_script(
            "const c = new AudioContext(); const r = c.sampleRate; c.close(); return r"
        ))
    finally:
        probe.quit()
    rate = 48000 if native != 48000 else 44100
    print(f"native context rate {native} Hz; forcing {rate} Hz")
    mic = tmp_path / f"mic{rate}.wav"
    duration = make_mic_wav(clip.path, rate, mic)
    driver = open_browser(browser_paths, mic, tmp_path / "dl", tmp_path / "profile")
    try:
        # A key saved earlier in this tab (sessionStorage) is used without asking.
        driver.get(server.url + "/healthz")
        driver.execute_script("sessionStorage.setItem('kettle.apiKey', arguments[0])", API_KEY)
        driver.get_log("browser")  # drop what /healthz caused (a favicon 404); not the page's
        driver.get(f"{server.url}/?capture_rate={rate}")
        wait_for(driver, lambda d: d.find_element(By.ID, "state-text").text == "Ready", 20,
                 "the stored key was not used")
        info = record_clip(driver, duration)
        print("page:", json.dumps(info, indent=1))
        assert info["capture"] == f"{rate / 1000:g} → 16 kHz"
        hypothesis = " ".join(info["finals"])
        error = wer_fn([clip.reference], [hypothesis])
        print(f"WER {error:.3f}: {hypothesis!r}")
        assert error <= 0.25, f"WER {error:.3f} for {hypothesis!r}"
        assert not severe(driver.get_log("browser"))
    finally:
        driver.quit()


def test_page_reconnects_after_the_server_dies_and_loses_no_words(
    browser_paths: tuple[str, str],
    eval_clips: list[Any],
    wer_fn: Any,
    tmp_path: Path,
) -> None:
    """Kill the server mid-utterance (SIGKILL: no close frame), start a new one on the same port.

    The page keeps recording, says it lost the connection and is reconnecting, retries with
    backoff (refused, then 503 while the model loads), and sends the new session the audio
    the old one never finalized: the final text is still the whole clip.
    """
    from selenium.webdriver.common.by import By

    clip = clip_by_file(eval_clips, MAIN_CLIP)
    mic = tmp_path / "mic.wav"
    duration = make_mic_wav(clip.path, 48000, mic)
    driver = open_browser(browser_paths, mic, tmp_path / "dl", tmp_path / "profile")
    with contextlib.ExitStack() as stack:
        stack.callback(driver.quit)
        first = stack.enter_context(kettle_serve(tmp_path / "first.log"))
        port = first.url.rsplit(":", 1)[1]
        driver.get(first.url + "/")
        wait_for(driver, lambda d: d.find_element(By.ID, "state-text").text == "Ready", 20,
                 "the page did not find the server ready")

        def kill_and_restart() -> None:
            first.process.kill()
            first.process.wait()
            wait_for(driver, lambda d: "Reconnecting in" in d.find_element(By.ID, "notice-text").text,
                     20, "no reconnect notice after the connection was lost")
            stack.enter_context(kettle_serve(tmp_path / "second.log", "--port", port))

        info = record_clip(driver, duration, during=kill_and_restart)
        print("page:", json.dumps(info, indent=1))
        lost = [n for n in info["notices"] if n.startswith("The connection was lost.")]
        assert lost and "Reconnecting in" in lost[0], info["notices"]
        assert any(n.startswith("Reconnected.") for n in info["notices"]), info["notices"]
        hypothesis = " ".join(info["finals"])
        error = wer_fn([clip.reference], [hypothesis])
        print(f"WER {error:.3f}: {hypothesis!r}")
        assert error <= 0.25, f"WER {error:.3f} for {hypothesis!r}: words were lost"
        for entry in severe(driver.get_log("browser")):
            # The browser logs each refused connection attempt while the server is away.
            assert re.search(
                r"WebSocket connection|ERR_CONNECTION_REFUSED|status of 503", entry["message"]
            ), entry
