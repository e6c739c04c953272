"""openai_speakers: the known-speaker fields and the segments' string labels."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from kettle.streaming.protocols.openai import speakers as sp


def unit(i: int, n: int = 8) -> np.ndarray:
    v = np.zeros(n, np.float32)
    v[i] = 1.0
    return v


def test_letters_run_like_spreadsheet_columns() -> None:
    assert [sp.letter(i) for i in (0, 1, 25, 26, 27)] == ["A", "B", "Z", "AA", "AB"]


def test_clusters_get_letters_in_the_order_first_heard() -> None:
    assert sp.name_segments([1, 0, 1, 2], [None] * 4) == ["A", "B", "A", "C"]


def test_a_matching_reference_names_the_segment_and_others_keep_letters() -> None:
    refs = [("agent", unit(1)), ("customer", unit(5))]
    got = sp.name_segments([0, 1, 0], [unit(0), unit(1), unit(0)], refs)
    assert got == ["A", "agent", "A"]


def test_below_the_threshold_no_name_is_given() -> None:
    near = (unit(1) + unit(2)) / np.sqrt(2)  # similarity 0.71 < 0.72
    assert sp.name_segments([0], [near.astype(np.float32)], [("agent", unit(1))]) == ["A"]


def test_a_short_segment_takes_its_clusters_name() -> None:
    assert sp.name_segments([0, 0], [unit(1), None], [("agent", unit(1))]) == ["agent", "agent"]


def test_a_known_speaker_named_a_keeps_the_letter() -> None:
    assert sp.name_segments([0, 1], [unit(1), unit(3)], [("A", unit(1))]) == ["A", "B"]


def test_data_urls_decode() -> None:
    url = "data:audio/wav;base64," + base64.b64encode(b"RIFF").decode()
    assert sp.decode_data_url(url) == b"RIFF"
    assert sp.known_speakers([" agent "], [url]) == (("agent", b"RIFF"),)


@pytest.mark.parametrize(
    ("names", "refs", "param"),
    [
        (["a"], [], "known_speaker_references"),
        ([], ["data:audio/wav;base64,AAAA"], "known_speaker_names"),
        (["a"] * 5, ["data:audio/wav;base64,AAAA"] * 5, "known_speaker_names"),
        (["a", "a"], ["data:audio/wav;base64,AAAA"] * 2, "known_speaker_names"),
        ([""], ["data:audio/wav;base64,AAAA"], "known_speaker_names"),
        (["a"], ["https://example.com/a.wav"], "known_speaker_references"),
        (["a"], ["data:audio/wav,plain"], "known_speaker_references"),
        (["a"], ["data:audio/wav;base64,!!!"], "known_speaker_references"),
        (["a"], ["data:audio/wav;base64,"], "known_speaker_references"),
    ],
)
def test_bad_fields_name_their_param(names: list[str], refs: list[str], param: str) -> None:
    with pytest.raises(sp.SpeakerFieldError) as caught:
        sp.known_speakers(names, refs)
    assert caught.value.param == param
