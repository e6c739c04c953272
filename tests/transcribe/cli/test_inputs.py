"""`kettle transcribe`'s inputs (cli_inputs.py): each becomes the same plan for the local and
the Ray path, and both jobs reach the same audio. The CLI end to end is test_cli_transcribe.py,
Ray against local test_ray_batch.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
from kettle.transcribe.audio.read import RawFormat, load_audio
from kettle.transcribe.cli.inputs import Input, collect_inputs, is_raw, plan_inputs
from kettle.transcribe.files.pipeline import PipelineConfig
from kettle.transcribe.files.progress import Progress
from kettle.transcribe.files.result_cache import ResultCache

from tests.conftest import pcm16

SR = 16000
RAW = RawFormat.parse("s16le:16000:1")


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (0.2 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)


def inputs(tmp_path: Path) -> list[Input]:
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    sf.write(folder / "a.wav", tone(2.0), SR)
    (folder / "sub" / "b.pcm").write_bytes(pcm16(tone(1.5)))
    (folder / "notes.txt").write_text("not audio")  # not an audio extension: left out
    errors: list[tuple[str, str]] = []
    found = collect_inputs([str(folder), str(tmp_path / "missing.wav")], errors)
    assert errors == [(str(tmp_path / "missing.wav"), "no such file or directory")]
    assert [(i.out_stem.as_posix(), i.data) for i in found] == [("a", None), ("sub/b", None)]
    stdin = Input("<stdin>", None, Path("stdin"), data=pcm16(tone(1.0)))
    return [*found, stdin]


def test_both_paths_get_the_same_plan_and_the_same_audio(tmp_path: Path) -> None:
    items = inputs(tmp_path)
    assert [is_raw(i) for i in items] == [False, True, True]
    progress = Progress(enabled=False)
    with ResultCache(tmp_path / "cache.sqlite") as cache:
        planned = plan_inputs(items, RAW, "tiny.en|x", PipelineConfig(), cache, progress)
    # --raw applies to the .pcm file and stdin, not to the wav.
    assert [p.raw for p in planned] == [None, RAW, RAW]
    assert [round(p.expected_s, 3) for p in planned] == [2.0, 1.5, 0.0]  # stdin: unknown
    assert progress.files_total == 3 and round(progress.total_s, 3) == 3.5
    keys = [p.cache_key for p in planned]
    assert all(keys) and len(set(keys)) == 3
    for plan in planned:
        local, remote = plan.file_job(), plan.remote_job()
        assert (local.name, local.cache_key, local.expected_s) == (
            remote.name,
            remote.cache_key,
            remote.expected_s,
        )
        assert remote.raw == plan.raw
        np.testing.assert_array_equal(local.load(), load_audio(remote.read(), remote.raw))
    labels = [p.remote_job().label for p in planned]
    assert labels == ["a.wav", "b.pcm", "<input>"]  # what the local path's warnings say


def test_no_cache_no_keys_and_a_different_raw_a_different_key(tmp_path: Path) -> None:
    items = inputs(tmp_path)
    progress = Progress(enabled=False)
    assert all(
        p.cache_key is None for p in plan_inputs(items, RAW, "m", PipelineConfig(), None, progress)
    )
    with ResultCache(tmp_path / "cache.sqlite") as cache:
        one = plan_inputs(items, RAW, "m", PipelineConfig(), cache, progress)
        other = plan_inputs(
            items, RawFormat.parse("s16le:8000:1"), "m", PipelineConfig(), cache, progress
        )
    assert one[0].cache_key == other[0].cache_key  # a wav: --raw does not apply
    assert one[1].cache_key != other[1].cache_key
    assert round(other[1].expected_s, 3) == 3.0  # the same bytes at half the rate
