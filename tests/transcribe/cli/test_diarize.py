"""`kettle transcribe --diarize`: speaker labels in every format, the cache key, and errors.

The fast tests use the pitch stand-in encoder on scripted two-pitch audio; the slow one runs
the real GE2E encoder on two real speakers' clips."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from kettle.streaming.cli.main import main
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.cli import transcribe as tcli
from kettle.transcribe.files import windows
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.speakers import encoder as speaker_encoder
from kettle.transcribe.speakers.fake import PitchSpeakerEncoder

SR = 16000
DATA = Path(__file__).resolve().parents[2] / "data" / "speech" / "audio"
# Three turns, two voices, 2 s pauses (segments break at pauses over 1 s).
TURNS = [("voice@140", 2.0), ("silence", 2.0), ("voice@230", 2.0), ("silence", 2.0)]
TURNS += [("voice@140", 2.0)]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch) -> None:
    monkeypatch.setenv("KETTLE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def fake(monkeypatch) -> dict[str, int]:
    """The fake model, speech spans from the script, and the pitch encoder (loads counted)."""
    loads = {"speakers": 0}
    decoder = FakeDecoder(name="tiny.en")
    monkeypatch.setattr(tcli._LazyDecoder, "_new", lambda self: decoder)
    monkeypatch.setattr(windows, "speech_spans", lambda audio, config: _voiced_spans(audio))

    def encoder() -> PitchSpeakerEncoder:
        loads["speakers"] += 1
        return PitchSpeakerEncoder()

    monkeypatch.setattr(tcli, "load_speaker_encoder", encoder)
    return loads


def _voiced_spans(audio: np.ndarray) -> list[tuple[int, int]]:
    """Runs of non-silent 10 ms frames (the scripted silences are exact zeros)."""
    loud = np.abs(audio[: len(audio) // 160 * 160]).reshape(-1, 160).max(axis=1) > 0
    spans, start = [], None
    for i, on in enumerate([*loud, False]):
        if on and start is None:
            start = i
        elif not on and start is not None:
            spans.append((start * 160, i * 160))
            start = None
    return spans


def _two_voices(path: Path) -> Path:
    sf.write(path, scripted_audio(TURNS), SR)
    return path


def _run(tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "out"
    wav = _two_voices(tmp_path / "talk.wav")
    assert main(["transcribe", str(wav), "-o", str(out), "-f", "txt,srt,vtt,json", *extra]) == 0
    return out


def test_every_format_carries_the_speakers(tmp_path: Path, fake) -> None:
    out = _run(tmp_path, "--diarize")
    txt = (out / "talk.txt").read_text().splitlines()
    assert [line.split("]")[0] + "]" for line in txt] == [
        "[Speaker 1]",
        "[Speaker 2]",
        "[Speaker 1]",
    ]
    srt = (out / "talk.srt").read_text()
    assert re.findall(r"^\[(Speaker \d)\] ", srt, re.M) == ["Speaker 1", "Speaker 2", "Speaker 1"]
    vtt = (out / "talk.vtt").read_text()
    assert vtt.startswith("WEBVTT")
    assert re.findall(r"^<v (Speaker \d)>\S", vtt, re.M) == ["Speaker 1", "Speaker 2", "Speaker 1"]
    data = json.loads((out / "talk.json").read_text())
    assert [s["speaker"] for s in data["segments"]] == [0, 1, 0]  # 0-based in JSON


def test_without_diarize_nothing_changes(tmp_path: Path, fake) -> None:
    out = _run(tmp_path)
    assert "Speaker" not in (out / "talk.txt").read_text() + (out / "talk.vtt").read_text()
    assert all("speaker" not in s for s in json.loads((out / "talk.json").read_text())["segments"])
    assert fake["speakers"] == 0  # the speaker model is not even loaded


def test_the_cache_keeps_diarized_and_plain_results_apart(tmp_path: Path, fake) -> None:
    plain = (_run(tmp_path) / "talk.json").read_text()
    diarized = (_run(tmp_path, "--diarize") / "talk.json").read_text()
    assert '"speaker"' in diarized and '"speaker"' not in plain
    again = (_run(tmp_path, "--diarize") / "talk.json").read_text()
    assert again == diarized
    capped = json.loads(
        (_run(tmp_path, "--diarize", "--max-speakers", "1") / "talk.json").read_text()
    )
    assert {s["speaker"] for s in capped["segments"]} == {0}


def test_max_speakers_out_of_range_is_a_usage_error(tmp_path: Path, fake) -> None:
    wav = _two_voices(tmp_path / "talk.wav")
    for bad in ("0", "17", "two"):
        with pytest.raises(SystemExit) as info:
            main(["transcribe", str(wav), "--diarize", "--max-speakers", bad])
        assert info.value.code == 2


def test_a_missing_speaker_model_is_one_clear_line(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(tcli._LazyDecoder, "_new", lambda self: FakeDecoder(name="tiny.en"))
    monkeypatch.setattr(speaker_encoder, "available", lambda: False)
    wav = _two_voices(tmp_path / "talk.wav")
    rc = main(["transcribe", str(wav), "--diarize"])
    err = capsys.readouterr().err
    assert rc == 2 and speaker_encoder.INSTALL_HINT in err and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.skipif(not speaker_encoder.available(), reason="no speaker model installed")
def test_real_encoder_follows_two_real_speakers(tmp_path: Path) -> None:
    # The real model and VAD too: segments break at the 2 s pauses between turns.
    male = load_audio(DATA / "arctic__cmu_arctic_us_aew_a0001.wav", None)
    female = load_audio(DATA / "arctic__cmu_arctic_us_axb_a0004.wav", None)
    gap = np.zeros(2 * SR, np.float32)
    turns = [male, female, male]
    wav = tmp_path / "two.wav"
    sf.write(wav, np.concatenate([part for t in turns for part in (t, gap)]), SR)
    out = tmp_path / "out"
    assert main(["transcribe", str(wav), "-o", str(out), "-f", "json", "--diarize"]) == 0
    segments = json.loads((out / "two.json").read_text())["segments"]
    starts = np.cumsum([0.0] + [len(t) / SR + 2.0 for t in turns])
    spans = [(a, a + len(t) / SR) for a, t in zip(starts, turns, strict=False)]

    def overlap(seg: dict, span: tuple[float, float]) -> float:
        return min(seg["end"], span[1]) - max(seg["start"], span[0])

    # Whisper's word times drift a little: a segment belongs to the turn it overlaps most.
    turn_of = [max(range(len(spans)), key=lambda i: overlap(s, spans[i])) for s in segments]
    assert sorted(set(turn_of)) == [0, 1, 2]
    by_turn: dict[int, set[int]] = {}
    for seg, turn in zip(segments, turn_of, strict=True):
        by_turn.setdefault(turn, set()).add(seg["speaker"])
    assert all(len(v) == 1 for v in by_turn.values())
    # Turns 0 and 2 are the same voice, turn 1 another (whatever numbers they get).
    assert by_turn[0] == by_turn[2] != by_turn[1]


def test_diarize_with_ray_is_refused_before_any_work(tmp_path: Path, capsys, fake) -> None:
    pytest.importorskip("ray")
    wav = _two_voices(tmp_path / "talk.wav")
    assert main(["transcribe", str(wav), "--diarize", "--ray", "auto"]) == 2
    assert "--diarize does not run on --ray" in capsys.readouterr().err
    assert fake["speakers"] == 0
