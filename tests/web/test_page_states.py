"""How the page meets server states and browser refusals, in real headless Chromium.

These use kettle's real server with the fake model (in-process, fast); the real model runs in
test_page_e2e.py. Covered: a full server (503) and recovery, a multilingual model (language
choice reaches the server), and a denied microphone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

SPEECH = "audio/ls__2830-3980-0043.wav"  # 2 s of read speech: the fake model needs voiced audio


@pytest.fixture
def speech_wav(
    eval_clip: Callable[[str], Any],
    make_mic_wav: Callable[[Path, int, Path], float],
    tmp_path: Path,
) -> tuple[Path, float]:
    clip = eval_clip(SPEECH)
    out = tmp_path / "speech48k.wav"
    return out, make_mic_wav(clip.path, 48000, out)


def _fake_decoder(multilingual: bool = False) -> Any:
    from kettle.transcribe.model.fake import FakeDecoder

    class Decoder(FakeDecoder):
        @property
        def multilingual(self) -> bool:
            return multilingual

    return Decoder(name="fake-multilingual" if multilingual else "fake")


def test_full_server_is_reported_and_the_page_gets_in_when_a_slot_frees(
    fake_server: Callable[..., Any],
    open_browser: Callable[..., Any],
    page_tools: Any,
    speech_wav: tuple[Path, float],
) -> None:
    from websockets.sync.client import connect

    t = page_tools
    srv = fake_server(_fake_decoder(), max_sessions=1, retry_after_s=1)
    with connect(srv.server.ws_url) as holder:  # takes the only session until the block ends
        assert json.loads(holder.recv(timeout=10))["type"] == "ready"
        driver = open_browser(speech_wav[0])
        driver.get(srv.url + "/")
        t.wait(
            driver,
            lambda d: "full" in t.text(d, "notice-text"),
            20,
            "a full server was not reported at page load",
        )
        assert t.text(driver, "state-text") == "Server busy"
        driver.execute_script(t.observer)
        driver.find_element("id", "start").click()
        t.wait(
            driver,
            lambda d: re.search(r"full.*Reconnecting", t.text(d, "notice-text")),
            20,
            "Start on a full server did not say it is full and will retry",
        )
        assert driver.find_element("id", "stop").is_enabled()  # still recording meanwhile
    t.wait(
        driver,
        t.js("return document.getElementById('state').dataset.state === 'live'"),
        20,
        "the page did not get in once the slot was free",
    )
    driver.find_element("id", "stop").click()
    t.wait(driver, lambda d: t.text(d, "notice-text").startswith("Done:"), 30, "no done")
    for entry in t.severe(driver):
        # The browser logs the refused handshakes and the 503 of the diagnosis request.
        assert re.search(r"WebSocket connection|status of 503", entry["message"]), entry


@pytest.mark.slow  # paced in real time: seconds of wall time
def test_multilingual_model_offers_a_language_and_the_server_gets_it(
    fake_server: Callable[..., Any],
    open_browser: Callable[..., Any],
    page_tools: Any,
    speech_wav: tuple[Path, float],
) -> None:
    from selenium.webdriver.support.ui import Select

    t = page_tools
    srv = fake_server(_fake_decoder(multilingual=True))
    driver = open_browser(speech_wav[0])
    driver.get(srv.url + "/")
    t.wait_ready(driver)
    lang_row = driver.find_element("id", "lang-row")
    assert lang_row.is_displayed()
    Select(driver.find_element("id", "language")).select_by_value("de")
    info = t.record_clip(driver, speech_wav[1])
    assert info["finals"], "no final from the fake model"
    languages = {r.language for r in srv.decoder.requests_seen}
    assert languages == {"de"}, languages
    # The choice is remembered for the next visit.
    driver.refresh()
    t.wait_ready(driver)
    assert (
        Select(driver.find_element("id", "language")).first_selected_option.get_attribute("value")
        == "de"
    )
    assert not t.severe(driver)


def test_denied_microphone_is_explained_and_nothing_is_sent(
    fake_server: Callable[..., Any],
    open_browser: Callable[..., Any],
    page_tools: Any,
) -> None:
    t = page_tools
    srv = fake_server(_fake_decoder())
    driver = open_browser(fake_ui=False)
    driver.get(srv.url + "/")
    t.wait_ready(driver)
    driver.execute_cdp_cmd(
        "Browser.setPermission",
        {"permission": {"name": "microphone"}, "setting": "denied", "origin": srv.url},
    )
    driver.find_element("id", "start").click()
    t.wait(
        driver,
        lambda d: "permission was denied" in t.text(d, "notice-text"),
        20,
        "a denied microphone was not explained",
    )
    assert driver.find_element("id", "start").is_enabled()
    assert not driver.find_element("id", "stop").is_enabled()
    assert t.text(driver, "state-text") == "Idle"
    assert srv.server.sessions_active == 0
    assert not t.severe(driver)
