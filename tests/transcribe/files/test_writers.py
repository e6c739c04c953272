"""txt/srt/vtt/json rendering, parse-back, and atomic writes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.files import writers
from kettle.transcribe.transcript import Segment, Transcript
from kettle.transcribe.types import Word

T = Transcript(
    duration_s=3725.5,
    language="en",
    model="tiny.en",
    segments=(
        Segment(
            0.0,
            1.25,
            "Hello there.",
            (Word(" Hello", 0.0, 0.5, 0.9), Word(" there.", 0.6, 1.25, 0.8)),
        ),
        Segment(1.2, 3.0, "Overlapping start is pushed back."),
        Segment(3.0, 3.0, "Zero length still gets a cue."),
        Segment(4.0, 5.0, "   "),
        Segment(
            3723.0, 3725.123, "An hour later, a line long enough to be wrapped onto two lines."
        ),
    ),
)

Cue = tuple[float, float, str]


def check_cues(cues: list[Cue], duration: float) -> None:
    prev_end = 0.0
    for start, end, text in cues:
        assert text.strip()
        assert prev_end <= start < end <= duration + 0.01
        prev_end = end


def test_parse_formats() -> None:
    assert writers.parse_formats("srt, TXT,srt") == ("srt", "txt")
    with pytest.raises(ConfigError, match="unknown format"):
        writers.parse_formats("txt,doc")
    with pytest.raises(ConfigError):
        writers.parse_formats(" , ")


def test_srt_parses_back_in_order(parse_cues: Callable[[str], list[Cue]]) -> None:
    text = writers.format_srt(T)
    assert text.startswith("1\n00:00:00,000 --> 00:00:01,250\nHello there.\n")
    assert "01:02:03,000 --> 01:02:05,123" in text
    cues = parse_cues(text)
    assert [c[2] for c in cues][:3] == [
        "Hello there.",
        "Overlapping start is pushed back.",
        "Zero length still gets a cue.",
    ]
    assert len(cues) == 4  # the blank segment gets no cue
    check_cues(cues, T.duration_s)
    numbers = [b.split("\n")[0] for b in text.strip().split("\n\n")]
    assert numbers == ["1", "2", "3", "4"]
    assert max(len(line) for line in text.splitlines()) <= writers.LINE_WIDTH


def test_vtt_parses_back(parse_cues: Callable[[str], list[Cue]]) -> None:
    text = writers.format_vtt(T)
    assert text.startswith("WEBVTT\n\n00:00:00.000 --> 00:00:01.250\n")
    cues = parse_cues(text)
    assert len(cues) == 4
    check_cues(cues, T.duration_s)


def test_txt_one_line_per_segment() -> None:
    assert writers.format_txt(T).splitlines()[0] == "Hello there."
    assert writers.format_txt(Transcript(1.0, "en", ())) == ""


def test_json_round_trip() -> None:
    back = Transcript.from_json(writers.format_json(T))
    assert back == T
    assert Transcript.from_dict(back.to_dict()) == back


def test_write_outputs_atomic(tmp_path: Path) -> None:
    base = tmp_path / "sub" / "clip"
    paths = writers.write_outputs(T, base, ("txt", "json"))
    assert [p.name for p in paths] == ["clip.txt", "clip.json"]
    assert Transcript.from_json(paths[1].read_text()) == T
    assert sorted(os.listdir(base.parent)) == ["clip.json", "clip.txt"]  # no temp files left


def test_failed_write_leaves_old_file_and_no_temp(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old\n")

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writers.os, "fsync", boom)
    with pytest.raises(OSError):
        writers.atomic_write_text(target, "new text that never lands\n")
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_render_error_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    def broken(_t: Transcript) -> str:
        raise RuntimeError("renderer bug")

    monkeypatch.setitem(writers.RENDERERS, "json", broken)
    with pytest.raises(RuntimeError):
        writers.write_outputs(T, tmp_path / "clip", ("txt", "json"))
    assert os.listdir(tmp_path) == []


SPOKEN = Transcript(
    duration_s=9.0,
    language="en",
    segments=(
        Segment(0.0, 1.0, "Hello.", speaker=0),
        Segment(1.5, 2.0, "Still me.", speaker=0),
        Segment(3.0, 6.0, "And now a second voice with a line long enough to wrap.", speaker=1),
        Segment(7.0, 8.0, "Me again.", speaker=0),
    ),
)


def test_txt_has_one_line_per_speaker_turn() -> None:
    assert writers.format_txt(SPOKEN) == (
        "[Speaker 1] Hello. Still me.\n"
        "[Speaker 2] And now a second voice with a line long enough to wrap.\n"
        "[Speaker 1] Me again.\n"
    )


def test_every_cue_names_its_one_speaker() -> None:
    srt = writers.format_srt(SPOKEN).split("\n\n")
    assert [block.splitlines()[2][:12] for block in srt] == [
        "[Speaker 1] ",
        "[Speaker 1] ",
        "[Speaker 2] ",
        "[Speaker 1] ",
    ]
    vtt = writers.format_vtt(SPOKEN)
    wrapped = vtt.split("\n\n")[3].splitlines()[1:]
    assert len(wrapped) == 2 and all(line.startswith("<v Speaker 2>") for line in wrapped)
