"""The tone fake model hears its words only where they arrive unbroken."""

from __future__ import annotations

import numpy as np
import pytest
from kettle.kernels.pcm import PcmStreamDecoder
from kettle.kernels.resample import resample
from kettle.transcribe.model.fake_tones import ToneDecoder, heard_words, tone_speech
from kettle.transcribe.types import DecodeKind, DecodeRequest

from tests.conftest import pcm16

WORDS = ["kilo", "lima", "mike"]


def spoken(audio: np.ndarray) -> list[str]:
    return [w for w, _, _ in heard_words(audio)]


@pytest.mark.parametrize("offset", [0, 1, 159, 320, 1234])
def test_words_heard_on_any_grid_offset_and_after_16_bit_rounding(offset: int) -> None:
    audio = np.concatenate([np.zeros(offset, np.float32), tone_speech(WORDS)])
    assert spoken(audio) == WORDS
    rounded = np.frombuffer(pcm16(audio), "<i2").astype(np.float32) / 32768
    assert spoken(rounded) == WORDS


def test_byte_shifted_pcm_has_no_words() -> None:
    data = pcm16(np.concatenate([np.zeros(100, np.float32), tone_speech(WORDS)]))
    shifted = np.frombuffer(data[1:-1], "<i2").astype(np.float32) / 32768
    assert spoken(shifted) == []


@pytest.mark.parametrize("where", [1600, 3200, 4000, 6400])  # inside "kilo", off the fades
def test_a_dropped_or_doubled_sample_inside_a_word_loses_it(where: int) -> None:
    audio = tone_speech(WORDS)
    assert spoken(np.delete(audio, where)) == WORDS[1:]
    assert spoken(np.insert(audio, where, audio[where])) == WORDS[1:]


def test_a_word_cut_in_two_is_heard_in_neither_half() -> None:
    audio = tone_speech(["kilo"])
    assert spoken(audio[:4000]) == [] and spoken(audio[4000:]) == []


def test_resampled_in_odd_chunks_the_words_survive() -> None:
    at24 = resample(tone_speech(WORDS), 16000, 24000)
    data = pcm16(at24)
    pcm = PcmStreamDecoder("pcm_s16le", 24000, 1)
    parts = [pcm.feed(data[i : i + 777]) for i in range(0, len(data), 777)] + [pcm.flush()]
    assert spoken(np.concatenate(parts)) == WORDS


def test_decoder_answers_with_the_words_and_their_times() -> None:
    audio = np.concatenate([np.zeros(8000, np.float32), tone_speech(WORDS)])
    request = DecodeRequest(audio, DecodeKind.FINAL, "r1")
    result = ToneDecoder().decode_batch([request])[0]
    assert result.text == "kilo lima mike"
    noise = np.random.default_rng(0).standard_normal(16000).astype(np.float32) * 0.3
    assert ToneDecoder().decode_batch([DecodeRequest(noise, DecodeKind.FINAL, "r2")])[0].text == ""
