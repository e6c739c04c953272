"""`kettle transcribe --ray`: the same results as the local path, from a local Ray cluster.

One cluster (2 CPUs, a small object store) is started for the module; the CLI joins it.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from kettle.streaming.cli.main import main
from kettle.transcribe.corpus.driver import RayOptions, RemoteJob, transcribe_on_ray
from kettle.transcribe.corpus.worker import WorkerSpec
from kettle.transcribe.errors import AudioError, ConfigError, ModelError
from kettle.transcribe.files.pipeline import PipelineConfig
from kettle.transcribe.files.result_cache import ResultCache
from kettle.transcribe.files.windows import WindowConfig
from kettle.transcribe.model.fake import FakeDecoder, synth_voice
from kettle.transcribe.transcript import Segment, Transcript

ray = pytest.importorskip("ray", reason="pip install 'kettle[ray]'")
# slow: every test starts or uses a local Ray cluster (seconds of start-up per worker).
pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parents[2] / "data"
SR = 16000
# Byte-for-byte comparisons with the local path need the model to get bit-identical inputs
# on both: a worker transcribes one file per call on one thread (2 files, 2 CPUs), while the
# local run would batch both files' windows and use every core, and a batch of another shape
# or a thread count may round a token the other way on some CPUs. One window per batch and
# one thread make every decode the same on both paths.
SAME_DECODES = ["--batch-size", "1", "--threads", "1"]


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    # Workers cannot import this test module: ship its functions (test models) by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(
        num_cpus=2,
        object_store_memory=100 << 20,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch) -> Path:
    path = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("KETTLE_CACHE_DIR", str(path))
    return path


def _fake_spec() -> WorkerSpec:
    # Fixed windows: the fake model hears words in synthetic voice, Silero would not.
    config = PipelineConfig(windows=WindowConfig(vad=False), recover_depth=0)
    return WorkerSpec(make_decoder=FakeDecoder, config=config)


def _voice_job(index: int, seconds: float) -> RemoteJob:
    import io

    buf = io.BytesIO()
    sf.write(buf, synth_voice(seconds), SR, format="WAV")
    data = buf.getvalue()
    return RemoteJob(name=f"v{index}.wav", read=lambda: data, label=f"v{index}.wav")


def _files(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.mark.slow
def test_same_outputs_as_the_local_path(tmp_path: Path) -> None:
    """Every format, byte for byte, with the real model on real speech."""
    inputs = tmp_path / "in"
    (inputs / "sub").mkdir(parents=True)
    shutil.copy(DATA / "jfk.flac", inputs / "jfk.flac")
    audio, rate = sf.read(DATA / "jfk.flac", dtype="float32")
    sf.write(inputs / "sub" / "second-half.wav", audio[len(audio) // 2 :], rate)
    args = [str(inputs), "-f", "txt,srt,vtt,json", "--word-timestamps", "--no-cache"]
    args += SAME_DECODES
    assert main(["transcribe", *args, "-o", str(tmp_path / "local")]) == 0
    assert main(["transcribe", *args, "-o", str(tmp_path / "ray"), "--ray", "auto"]) == 0
    local, remote = _files(tmp_path / "local"), _files(tmp_path / "ray")
    assert len(local) == 8
    assert remote == local
    assert "ask not what your country can do for you" in local["jfk.txt"].replace("\n", " ")


class _ListHandler(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.WARNING)
        self._records = records

    def emit(self, record: logging.LogRecord) -> None:
        self._records.append(record)


@pytest.mark.slow
def test_bad_files_get_the_local_paths_lines_and_the_rest_finish(
    tmp_path: Path, capsys, caplog
) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    shutil.copy(DATA / "jfk.flac", inputs / "good.flac")
    (inputs / "empty.wav").write_bytes(b"")
    (inputs / "text.wav").write_text("this is not audio\n" * 50)
    (inputs / "plain.raw").write_bytes(b"\x00\x00" * 10)
    audio, rate = sf.read(DATA / "jfk.flac", dtype="int16")
    sf.write(inputs / "cut.wav", audio, rate, subtype="PCM_16")
    whole = (inputs / "cut.wav").read_bytes()
    (inputs / "cut.wav").write_bytes(whole[: len(whole) // 2])
    args = ["transcribe", str(inputs), str(tmp_path / "missing.flac"), "--no-cache"]
    args += SAME_DECODES

    def run(*extra: str) -> tuple[int, list[str], dict[str, str], list[str]]:
        # A handler of our own on "kettle": ray.init may reconfigure the root logger's
        # handlers (caplog's among them), which would hide the driver's warnings from caplog.
        records: list[logging.LogRecord] = []
        handler = _ListHandler(records)
        kettle_logger = logging.getLogger("kettle")
        kettle_logger.addHandler(handler)
        out = tmp_path / ("out" + "-".join(extra))
        try:
            with caplog.at_level(logging.WARNING, logger="kettle"):
                rc = main([*args, "-o", str(out), *extra])
        finally:
            kettle_logger.removeHandler(handler)
        err = capsys.readouterr().err.strip().splitlines()
        warnings = [r.getMessage() for r in records if r.name.startswith("kettle")]
        return rc, sorted(err), _files(out), warnings

    local = run()
    remote = run("--ray", "auto", "--workers", "1")
    assert local[0] == remote[0] == 1
    assert len(local[1]) == 4, local[1]  # empty, text, plain.raw, missing
    assert remote[1] == local[1]
    assert "text.wav: not a decodable audio file" in "\n".join(remote[1])
    assert sorted(remote[2]) == ["cut.txt", "good.txt"]
    assert remote[2] == local[2]
    assert any("cut.wav: file is damaged or cut off" in w for w in local[3]), local[3]
    assert remote[3] == local[3]


def test_two_workers_are_two_processes() -> None:
    jobs = [_voice_job(i, 2.0) for i in range(4)]
    options = RayOptions(workers=2, rows_per_call=1)
    outcomes = list(transcribe_on_ray(jobs, _fake_spec(), options))
    assert [o.name for o in outcomes] == [j.name for j in jobs]  # input order
    assert all(o.transcript is not None and o.transcript.text for o in outcomes)
    pids = {o.worker.split("@")[0] for o in outcomes}
    assert len(pids) == 2 and str(os.getpid()) not in pids


def test_a_corrupt_file_is_an_error_row_while_the_others_finish() -> None:
    corrupt = RemoteJob(name="corrupt.wav", read=lambda: b"RIFF" + bytes(200), label="corrupt.wav")
    jobs = [_voice_job(0, 2.0), corrupt, _voice_job(2, 3.0)]
    outcomes = list(transcribe_on_ray(jobs, _fake_spec(), RayOptions(workers=1)))
    assert [o.name for o in outcomes] == ["v0.wav", "corrupt.wav", "v2.wav"]
    assert outcomes[1].transcript is None
    assert outcomes[1].error and "not a decodable audio file" in outcomes[1].error
    assert outcomes[0].transcript is not None and outcomes[2].transcript is not None
    assert len(outcomes[2].transcript.text.split()) == 6  # 3 s of voice, a word per 0.5 s


def test_cached_files_are_never_read_or_submitted(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "results.sqlite")
    held = Transcript(1.0, "en", (Segment(0.0, 1.0, "from the cache"),), model="fake")
    cache.put("k1", held)

    def never() -> bytes:
        raise AssertionError("a cached file was read")

    cached = RemoteJob(name="cached.wav", read=never, label="cached.wav", cache_key="k1")
    fresh = _voice_job(1, 2.0)
    fresh = RemoteJob(fresh.name, fresh.read, fresh.label, cache_key="k2")
    outcomes = list(transcribe_on_ray([cached, fresh], _fake_spec(), RayOptions(), cache=cache))
    assert outcomes[0].cached and outcomes[0].transcript == held
    assert outcomes[1].transcript is not None and not outcomes[1].cached
    assert cache.get("k2") == outcomes[1].transcript  # the driver wrote it through the cache
    # Everything cached: nothing reaches the cluster.
    again = [RemoteJob(j.name, never, j.label, cache_key=j.cache_key) for j in (cached, fresh)]
    outcomes = list(transcribe_on_ray(again, _fake_spec(), RayOptions(), cache=cache))
    assert [o.cached for o in outcomes] == [True, True]
    cache.close()


def test_a_file_the_driver_cannot_read_is_reported_without_a_worker() -> None:
    def unreadable() -> bytes:
        raise AudioError("no such file")

    bad = RemoteJob(name="gone.wav", read=unreadable, label="gone.wav")
    (outcome,) = transcribe_on_ray([bad], _fake_spec(), RayOptions())
    assert outcome.error == "no such file" and outcome.worker == ""


def _broken_model() -> FakeDecoder:
    raise ModelError("model 'x' is not installed on this node")


def test_a_model_no_worker_can_load_stops_the_run(tmp_path: Path) -> None:
    spec = WorkerSpec(make_decoder=_broken_model, config=PipelineConfig())
    with pytest.raises(ModelError, match="not installed on this node"):
        list(transcribe_on_ray([_voice_job(0, 1.0)], spec, RayOptions(workers=1)))


def test_cluster_options_need_ray(tmp_path: Path, capsys) -> None:
    path = tmp_path / "a.wav"
    sf.write(path, np.zeros(SR, np.float32), SR)
    assert main(["transcribe", str(path), "--workers", "2"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "kettle: error: --workers and --gpus-per-worker need --ray"
    )
    with pytest.raises(SystemExit) as info:
        main(["transcribe", str(path), "--ray", "auto", "--workers", "0"])
    assert info.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_a_pool_the_cluster_cannot_hold_is_refused_at_once() -> None:
    jobs = [_voice_job(i, 1.0) for i in range(4)]
    with pytest.raises(ConfigError, match=r"3 worker\(s\) of 1 CPU each do not fit"):
        list(transcribe_on_ray(jobs, _fake_spec(), RayOptions(workers=3)))  # 2 CPUs
    with pytest.raises(ConfigError, match="0 GPUs"):
        list(transcribe_on_ray(jobs, _fake_spec(), RayOptions(workers=1, gpus_per_worker=1)))
