"""`kettle transcribe` end to end: formats, outputs, cache, and every kind of bad input."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from kettle.streaming.cli.main import main
from kettle.transcribe.cli import transcribe as tcli
from kettle.transcribe.errors import ModelError
from kettle.transcribe.files import windows
from kettle.transcribe.files.pipeline import PipelineConfig
from kettle.transcribe.model.fake import FakeDecoder
from kettle.transcribe.transcript import Transcript

SR = 16000


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch) -> Path:
    path = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("KETTLE_CACHE_DIR", str(path))
    return path


@pytest.fixture
def fake_model(monkeypatch) -> dict[str, int]:
    """Swap the model for the deterministic fake and count the times it is loaded."""
    loads = {"n": 0, "decodes": 0}
    fake = FakeDecoder(name="tiny.en")
    real_decode = fake.decode_batch

    def counting(requests):
        loads["decodes"] += 1
        return real_decode(requests)

    monkeypatch.setattr(fake, "decode_batch", counting)

    def load(self):
        loads["n"] += 1
        return fake

    monkeypatch.setattr(tcli._LazyDecoder, "_new", load)
    # Tones are not speech to Silero: treat all audio as speech with the fake model.
    monkeypatch.setattr(windows, "speech_spans", lambda audio, config: [(0, len(audio))])
    return loads


def speechlike(path: Path, seconds: float = 3.0) -> Path:
    """A file the fake model 'hears' (it counts voiced frames)."""
    t = np.arange(int(seconds * SR)) / SR
    sf.write(path, 0.2 * np.sin(2 * np.pi * 200 * t), SR)
    return path


def files_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# --- bad input: one clear line, non-zero exit, nothing written ----------------------------


def test_bad_inputs_each_get_one_line(tmp_path: Path, capsys, fake_model) -> None:
    (tmp_path / "empty.wav").write_bytes(b"")
    (tmp_path / "text.wav").write_text("this is not audio\n" * 50)
    (tmp_path / "noaudio").mkdir()
    (tmp_path / "noaudio" / "notes.txt").write_text("hi")
    out = tmp_path / "out"
    args = ["empty.wav", "text.wav", "noaudio", "missing.flac", "plain.raw"]
    (tmp_path / "plain.raw").write_bytes(b"\x00\x00" * 10)
    rc = main(["transcribe", *[str(tmp_path / a) for a in args], "-o", str(out), "-f", "txt,json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert len(err) == 5, err
    assert all(line.startswith("kettle: error: ") for line in err)
    joined = "\n".join(err)
    assert "empty.wav: empty file" in joined
    assert "text.wav: not a decodable audio file" in joined
    assert "noaudio: no audio files in this folder" in joined
    assert "missing.flac: no such file or directory" in joined
    assert "plain.raw: headerless PCM: pass --raw" in joined
    assert "Traceback" not in joined
    assert not out.exists() or files_in(out) == []


def test_good_files_finish_despite_a_bad_one(tmp_path: Path, capsys, fake_model) -> None:
    good = speechlike(tmp_path / "good.wav")
    (tmp_path / "bad.wav").write_text("nope")
    out = tmp_path / "out"
    rc = main(["transcribe", str(tmp_path / "bad.wav"), str(good), "-o", str(out)])
    assert rc == 1
    assert files_in(out) == ["good.txt"]
    assert (out / "good.txt").read_text().strip()
    assert capsys.readouterr().err.count("kettle: error:") == 1


def test_unknown_model_and_missing_extra(tmp_path: Path, capsys, monkeypatch) -> None:
    good = speechlike(tmp_path / "good.wav")
    out = tmp_path / "out"
    rc = main(["transcribe", str(good), "-o", str(out), "--model", "no-such-model"])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown model" in err and err.count("\n") == 1
    assert not out.exists()

    import kettle.transcribe.model.models as models

    def missing(name: str, **kwargs):
        raise ModelError(f"model '{name}' is not installed: pip install 'kettle[base]'")

    monkeypatch.setattr(models, "resolve_model", missing)
    rc = main(["transcribe", str(good), "-o", str(out), "--model", "base"])
    err = capsys.readouterr().err
    assert rc == 2 and "pip install 'kettle[base]'" in err and "Traceback" not in err
    assert not out.exists()


def test_usage_errors_exit_2(tmp_path: Path, capsys, fake_model) -> None:
    good = speechlike(tmp_path / "a.wav")
    assert main(["transcribe", str(good), "-f", "txt,srt"]) == 2  # two formats to stdout
    assert main(["transcribe", str(good), "-f", "docx", "-o", str(tmp_path / "o")]) == 2
    assert main(["transcribe", str(good), "--raw", "s24le:1:1"]) == 2
    with pytest.raises(SystemExit) as info:
        main(["transcribe", str(good), "--batch-size", "0"])
    assert info.value.code == 2
    (tmp_path / "b").mkdir()
    speechlike(tmp_path / "b" / "a.wav")
    rc = main(["transcribe", str(good), str(tmp_path / "b" / "a.wav"), "-o", str(tmp_path / "o")])
    assert rc == 2 and "would both write" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_folder_is_searched_recursively_and_mirrored(tmp_path: Path, fake_model) -> None:
    src = tmp_path / "src"
    (src / "deep" / "er").mkdir(parents=True)
    speechlike(src / "one.wav")
    speechlike(src / "deep" / "er" / "two.flac")
    (src / "deep" / "readme.md").write_text("not audio")
    out = tmp_path / "out"
    assert main(["transcribe", str(src), "-o", str(out), "-f", "json,vtt"]) == 0
    assert files_in(out) == ["deep/er/two.json", "deep/er/two.vtt", "one.json", "one.vtt"]


def test_stdout_and_stdin(tmp_path: Path, capsys, monkeypatch, fake_model) -> None:
    a = speechlike(tmp_path / "a.wav")
    b = speechlike(tmp_path / "b.wav", 2.0)
    assert main(["transcribe", str(a)]) == 0
    assert capsys.readouterr().out.strip() == "alpha bravo charlie delta echo foxtrot"
    assert main(["transcribe", str(a), str(b), "-o", "-", "-f", "json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [json.loads(x)["file"] for x in lines] == [str(a), str(b)]
    assert main(["transcribe", str(a), str(b)]) == 0
    assert capsys.readouterr().out.startswith(f"==> {a} <==\n")

    class Stdin:
        buffer = __import__("io").BytesIO(a.read_bytes())

    monkeypatch.setattr("sys.stdin", Stdin)
    assert main(["transcribe", "-", "-o", str(tmp_path / "o")]) == 0
    assert files_in(tmp_path / "o") == ["stdin.txt"]


def test_cache_second_run_does_not_decode(tmp_path: Path, fake_model, _own_cache: Path) -> None:
    a = speechlike(tmp_path / "a.wav")
    out = tmp_path / "out"
    assert main(["transcribe", str(a), "-o", str(out), "-f", "json"]) == 0
    first = (out / "a.json").read_text()
    assert fake_model == {"n": 1, "decodes": 1}
    (out / "a.json").unlink()
    assert main(["transcribe", str(a), "-o", str(out), "-f", "json"]) == 0
    assert fake_model["decodes"] == 1 and fake_model["n"] == 1  # model never even loaded
    assert (out / "a.json").read_text() == first
    assert main(["transcribe", str(a), "-o", str(out), "--no-cache"]) == 0
    assert fake_model["decodes"] == 2
    # Different options are a different entry.
    assert main(["transcribe", str(a), "-o", str(out), "--beam-size", "2"]) == 0
    assert fake_model["decodes"] == 3
    assert (_own_cache / "results.sqlite").exists()


def test_the_model_loads_on_its_own_thread_while_the_audio_is_cut(
    tmp_path: Path, monkeypatch, _own_cache: Path
) -> None:
    a = speechlike(tmp_path / "a.wav")
    events: list[str] = []

    def load(self: tcli._LazyDecoder) -> FakeDecoder:
        events.append(f"load on {threading.current_thread().name}")
        return FakeDecoder(name="tiny.en")

    def spans(audio: np.ndarray, config: object) -> list[tuple[int, int]]:
        events.append("cut")
        return [(0, len(audio))]

    monkeypatch.setattr(tcli._LazyDecoder, "_new", load)
    monkeypatch.setattr(windows, "speech_spans", spans)
    assert main(["transcribe", str(a), "-o", str(tmp_path / "o")]) == 0
    assert len(events) == 2 and "cut" in events
    assert next(e for e in events if e != "cut").startswith("load on kettle-load")
    events.clear()
    assert main(["transcribe", str(a), "-o", str(tmp_path / "o")]) == 0  # cached: no load
    assert events == []


def test_cache_cap_from_the_command_line_and_environment(
    tmp_path: Path, capsys, monkeypatch, fake_model, _own_cache: Path
) -> None:
    a = speechlike(tmp_path / "a.wav")
    out = tmp_path / "out"
    # A cap smaller than one result keeps nothing: the second run decodes again.
    for _ in range(2):
        assert main(["transcribe", str(a), "-o", str(out), "--cache-max-mb", "0.000001"]) == 0
    assert fake_model["decodes"] == 2
    with pytest.raises(SystemExit) as info:
        main(["transcribe", str(a), "--cache-max-mb", "0"])
    assert info.value.code == 2
    monkeypatch.setenv("KETTLE_CACHE_MAX_MB", "lots")
    assert main(["transcribe", str(a), "-o", str(out)]) == 2
    assert "KETTLE_CACHE_MAX_MB" in capsys.readouterr().err


# --- the real model on the eval set ---------------------------------------------------------


@pytest.mark.slow
def test_formats_transcribe_and_parse_back(
    eval_clips, tmp_path: Path, capsys, wer_fn, parse_cues
) -> None:
    # One of each kind: raw, opus, mp3, 8 kHz, 22.05 kHz, 44.1 kHz stereo, a truncated FLAC.
    picks = {}
    for clip in eval_clips:
        kind = (clip.path.suffix, clip.sample_rate, clip.channels)
        if kind not in picks and clip.category != "osr_long":
            picks[kind] = clip
    clips = list(picks.values())
    assert {".raw", ".ogg", ".mp3"} <= {c.path.suffix for c in clips}
    assert {8000, 22050, 44100} <= {c.sample_rate for c in clips}
    src = tmp_path / "src"
    src.mkdir()
    for clip in clips:
        os.symlink(clip.path, src / clip.path.name)
    flac = next(c for c in eval_clips if c.path.suffix == ".flac" and c.duration_s > 10)
    data = flac.path.read_bytes()
    (src / "cut.flac").write_bytes(data[: len(data) // 2])
    out = tmp_path / "out"
    rc = main(["transcribe", str(src), "-o", str(out), "-f", "txt,srt,vtt,json", "--raw",
               "s16le:16000:1"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    refs, hyps = [], []
    for clip in [*clips, None]:
        stem = clip.path.stem if clip else "cut"
        data_json = json.loads((out / f"{stem}.json").read_text())
        t = Transcript.from_dict(data_json)
        assert Transcript.from_json(t.to_json()) == t
        assert t.text.strip()
        for fmt in ("srt", "vtt"):
            cues = parse_cues((out / f"{stem}.{fmt}").read_text())
            assert cues, stem
            prev = 0.0
            for start, end, text in cues:
                assert prev <= start < end <= t.duration_s + 0.01 and text
                prev = end
            assert len(cues) == len([s for s in t.segments if s.text.strip()])
        assert (out / f"{stem}.txt").read_text().split() == " ".join(
            s.text for s in t.segments
        ).split()
        if clip is not None:
            refs.append(clip.reference)
            hyps.append(t.text)
    assert wer_fn(refs, hyps) < 0.25


def test_fast_packs_longer_windows_and_skips_recovery(tmp_path: Path, monkeypatch) -> None:
    audio = speechlike(tmp_path / "long.wav", seconds=45.0)
    monkeypatch.setattr(windows, "speech_spans", lambda audio, config: [(0, len(audio))])
    seen: dict[str, list[float]] = {}
    for mode in ("default", "fast"):
        fake = FakeDecoder(name="tiny.en")
        monkeypatch.setattr(tcli._LazyDecoder, "_new", lambda self, fake=fake: fake)
        flags = ["--fast"] if mode == "fast" else []
        rc = main(["transcribe", str(audio), "-o", str(tmp_path / mode), "--no-cache", *flags])
        assert rc == 0
        seen[mode] = [len(r.audio) / SR for r in fake.requests_seen]
        if mode == "fast":
            assert not any(r.word_timestamps for r in fake.requests_seen)  # no alignment pass
    assert seen["default"][:3] == [20.0, 20.0, 5.0]
    assert seen["fast"] == [30.0, 15.0]


def test_timed_formats_align_every_window_and_txt_only_where_text_is_short(
    tmp_path: Path, monkeypatch
) -> None:
    audio = speechlike(tmp_path / "long.wav", seconds=25.0)
    monkeypatch.setattr(windows, "speech_spans", lambda audio, config: [(0, len(audio))])
    asked: dict[str, list[bool]] = {}
    for fmt in ("txt", "srt"):
        fake = FakeDecoder(name="tiny.en")
        monkeypatch.setattr(tcli._LazyDecoder, "_new", lambda self, fake=fake: fake)
        out = tmp_path / fmt
        assert main(["transcribe", str(audio), "-o", str(out), "-f", fmt, "--no-cache"]) == 0
        first_pass = [r for r in fake.requests_seen if r.encode_min_s is not None]
        asked[fmt] = [r.word_timestamps for r in first_pass]
        gate = PipelineConfig().recover_chars_per_s
        assert all(r.words_below_chars_per_s == gate for r in first_pass)
    # srt cues are cut at words, so every window is aligned; txt needs no times.
    assert asked["srt"] == [True, True] and asked["txt"] == [False, False]


def test_files_load_one_single_threaded_replica_per_thread() -> None:
    assert tcli.file_model_config("tiny.en", 3, "cpu", 5).layout("cpu") == (3, 1)
    replicas, threads = tcli.file_model_config("tiny.en", 0, "cpu", 5).layout("cpu")  # all cores
    assert threads == 1 and 1 <= replicas <= tcli.MAX_FILE_REPLICAS
