"""The microphone page end to end: real headless Chromium, real `kettle serve`, real tiny.en.

Chromium's fake capture device plays an eval recording as the microphone (it starts when the
page calls getUserMedia and runs in real time); the page resamples it in its AudioWorklet,
streams it, and shows partials and finals. Screenshots land in test-artifacts/ at the repo root.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

API_KEY = "e2e-secret-key"
# Long enough for several partials before the utterance ends; clean read speech.
MAIN_CLIP = "audio/ls__1089-134686-0000.flac"
SHORT_CLIP = "audio/ls__1272-128104-0000.wav"
MAX_WER = 0.25


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, browser_paths: Any, kettle_serve: Any
) -> Iterator[Any]:
    """One real `kettle serve` with an API key for the module's tests."""
    log = tmp_path_factory.mktemp("kettle-serve") / "stderr.log"
    with kettle_serve(log, "--api-key", API_KEY) as srv:
        yield srv


def test_page_transcribes_the_microphone(
    server: Any,
    open_browser: Callable[..., Any],
    make_mic_wav: Callable[[Path, int, Path], float],
    page_tools: Any,
    artifacts_dir: Path,
    eval_clip: Callable[[str], Any],
    wer_fn: Any,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    t = page_tools
    clip = eval_clip(MAIN_CLIP)
    mic = tmp_path / "mic48k.wav"
    duration = make_mic_wav(clip.path, 48000, mic)
    driver = open_browser(mic)
    driver.get(server.url + "/")

    # The server wants a key: the page finds out by itself and asks for one.
    key = driver.find_element(By.ID, "api-key")
    t.wait(driver, lambda d: key.is_displayed(), 20, "no key field on a keyed server")
    assert "needs an API key" in t.text(driver, "notice-text")
    key.send_keys("wrong-key")
    driver.execute_script("arguments[0].dispatchEvent(new Event('change'))", key)
    t.wait(
        driver,
        lambda d: "refused" in t.text(d, "notice-text"),
        20,
        "a wrong key was not reported as refused",
    )
    key.clear()
    key.send_keys(API_KEY)
    driver.execute_script("arguments[0].dispatchEvent(new Event('change'))", key)
    t.wait_ready(driver)
    assert "tiny.en" in t.text(driver, "model")
    assert not driver.find_element(By.ID, "lang-row").is_displayed()  # English-only model
    # The key is kept for this tab only, unless "Remember on this device" is ticked.
    stored = driver.execute_script(
        "return [localStorage.getItem('kettle.apiKey'), sessionStorage.getItem('kettle.apiKey')]"
    )
    assert stored == [None, API_KEY]
    # A refused handshake is logged by the browser itself (the WebSocket failure and the 401
    # of the diagnosis probe); anything else severe is a bug in the page.
    for entry in t.severe(driver):
        assert re.search(r"WebSocket connection|status of 401", entry["message"]), entry

    info = t.record_clip(driver, duration, live_shot=artifacts_dir / "web-page-live.png")
    print("page:", json.dumps(info, indent=1))
    hypothesis = " ".join(info["finals"])
    error = wer_fn([clip.reference], [hypothesis])
    print(f"WER {error:.3f}: {hypothesis!r}")
    assert info["firstPartialMs"] is not None, "no partial was shown"
    assert info["firstFinalMs"] is not None, "no final was shown"
    assert info["firstPartialMs"] < info["firstFinalMs"], "the first final came before any partial"
    assert error <= MAX_WER, f"WER {error:.3f} for {hypothesis!r}"
    assert all(re.fullmatch(r"\d+:\d\d\.\d", s) for s in info["times"]), info["times"]
    assert re.fullmatch(r"\d+(\.\d)? → 16 kHz", info["capture"]), info["capture"]
    assert re.fullmatch(r"\d+\.\d\d s", info["partialLag"]), info["partialLag"]
    assert re.fullmatch(r"\d+\.\d\d s", info["finalLag"]), info["finalLag"]

    downloads = tmp_path / "downloads"
    driver.find_element(By.ID, "download-txt").click()
    assert t.read_download(downloads, ".txt").splitlines() == info["finals"]
    driver.find_element(By.ID, "download-srt").click()
    cues = t.read_download(downloads, ".srt").strip().split("\n\n")
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
    assert not any(API_KEY in r for r in resources), "the key went into a URL"
    assert not t.severe(driver)

    driver.save_screenshot(str(artifacts_dir / "web-page-desktop.png"))
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 375, "height": 1100, "deviceScaleFactor": 1, "mobile": True},
    )
    overflow = driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    driver.save_screenshot(str(artifacts_dir / "web-page-375px.png"))
    assert overflow <= 0, f"the page scrolls sideways at 375 px by {overflow} px"


def test_page_at_the_other_capture_rate(
    server: Any,
    open_browser: Callable[..., Any],
    make_mic_wav: Callable[[Path, int, Path], float],
    page_tools: Any,
    eval_clip: Callable[[str], Any],
    wer_fn: Any,
    tmp_path: Path,
) -> None:
    """The worklet at the rate the browser does not pick by itself (44.1 vs 48 kHz).

    Headless Chromium here opens its AudioContext at 44.1 kHz (it has no audio device); the
    page's capture_rate query forces the other rate, so both ratios run in a real browser.
    """
    t = page_tools
    clip = eval_clip(SHORT_CLIP)
    probe = open_browser()
    probe.get(server.url + "/healthz")
    native = int(
        probe.execute_script(
            "const c = new AudioContext(); const r = c.sampleRate; c.close(); return r"
        )
    )
    probe.quit()
    rate = 48000 if native != 48000 else 44100
    print(f"native context rate {native} Hz; forcing {rate} Hz")
    mic = tmp_path / f"mic{rate}.wav"
    duration = make_mic_wav(clip.path, rate, mic)
    driver = open_browser(mic)
    # A key saved earlier in this tab (sessionStorage) is used without asking.
    driver.get(server.url + "/healthz")
    driver.execute_script("sessionStorage.setItem('kettle.apiKey', arguments[0])", API_KEY)
    driver.get_log("browser")  # drop what /healthz caused (a favicon 404); not the page's
    driver.get(f"{server.url}/?capture_rate={rate}")
    t.wait_ready(driver)
    info = t.record_clip(driver, duration)
    print("page:", json.dumps(info, indent=1))
    assert info["capture"] == f"{rate / 1000:g} → 16 kHz"
    hypothesis = " ".join(info["finals"])
    error = wer_fn([clip.reference], [hypothesis])
    print(f"WER {error:.3f}: {hypothesis!r}")
    assert error <= MAX_WER, f"WER {error:.3f} for {hypothesis!r}"
    assert not t.severe(driver)


def test_page_reconnects_after_the_server_dies_and_loses_no_words(
    open_browser: Callable[..., Any],
    make_mic_wav: Callable[[Path, int, Path], float],
    page_tools: Any,
    kettle_serve: Any,
    eval_clip: Callable[[str], Any],
    wer_fn: Any,
    tmp_path: Path,
) -> None:
    """Kill the server mid-utterance (SIGKILL: no close frame), start a new one on the same port.

    The page keeps recording, says it lost the connection and is reconnecting, retries with
    backoff (refused, then 503 while the model loads), and sends the new session the audio
    the old one never finalized: the final text is still the whole clip.
    """
    t = page_tools
    clip = eval_clip(MAIN_CLIP)
    mic = tmp_path / "mic.wav"
    duration = make_mic_wav(clip.path, 48000, mic)
    driver = open_browser(mic)
    with contextlib.ExitStack() as stack:
        first = stack.enter_context(kettle_serve(tmp_path / "first.log"))
        port = first.url.rsplit(":", 1)[1]
        driver.get(first.url + "/")
        t.wait_ready(driver)

        def kill_and_restart() -> None:
            first.process.kill()
            first.process.wait()
            t.wait(
                driver,
                lambda d: "Reconnecting" in t.text(d, "notice-text"),
                20,
                "no reconnect notice after the connection was lost",
            )
            stack.enter_context(kettle_serve(tmp_path / "second.log", "--port", port))

        info = t.record_clip(driver, duration, during=kill_and_restart)
    print("page:", json.dumps(info, indent=1))
    lost = [n for n in info["notices"] if n.startswith("The connection was lost.")]
    assert lost and "Reconnecting" in lost[0], info["notices"]
    assert any(n.startswith("Reconnected.") for n in info["notices"]), info["notices"]
    hypothesis = " ".join(info["finals"])
    error = wer_fn([clip.reference], [hypothesis])
    print(f"WER {error:.3f}: {hypothesis!r}")
    assert error <= MAX_WER, f"WER {error:.3f} for {hypothesis!r}: words were lost"
    for entry in t.severe(driver):
        # The browser logs each refused connection attempt while the server is away, and the
        # page's diagnosis probe of a failed handshake (readyz: 503 while the model loads).
        assert re.search(
            r"WebSocket connection|ERR_CONNECTION_REFUSED|status of 503",
            entry["message"],
        ), entry
