"""`kettle simulate`: the pure measurement pieces, the runner with the fake model, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from kettle.streaming.cli.simulation import (
    Clip,
    RevisionCounter,
    StreamLog,
    corpus_wer,
    event_record,
    latency_stats,
    percentile,
    rotations,
    run_simulation,
    word_errors,
)
from kettle.streaming.core.events import Done, Error, Final, Partial
from kettle.streaming.core.session import SessionConfig
from kettle.streaming.engine.engine import Engine
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.types import SAMPLE_RATE, Word

SR = SAMPLE_RATE


def test_percentiles() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    stats = latency_stats([0.1] * 99 + [1.0])
    assert stats["n"] == 100 and stats["p50"] == pytest.approx(0.1) and stats["max"] == 1.0
    assert stats["p99"] == pytest.approx(0.109, abs=1e-3)


def test_revision_counter_counts_every_broken_promise() -> None:
    c = RevisionCounter()
    c.observe(Partial(0, 0, 1, "Hello there", ""))
    c.observe(Partial(0, 0, 2, "hello there you", "Hello,"))
    c.observe(Final(0, 0, 3, "Hello there you.", (), "en"))
    assert c.revisions == 0
    c.observe(Partial(1, 0, 1, "a b", "a"))
    c.observe(Partial(1, 0, 2, "x b", "x"))  # stable changed, text ok with its own stable
    assert c.revisions == 1
    c.observe(Partial(2, 0, 2, "q r", "p"))  # text does not start with stable
    assert c.revisions == 2
    c.observe(Final(2, 0, 2, "r", (), "en"))  # final drops the stable word
    assert c.revisions == 3


def test_word_errors_use_whisper_normalisation() -> None:
    assert word_errors("Mr. Smith's 2 dogs", "mister smith's two dogs")[0] == 0
    assert word_errors("a b c d", "a x c") == (2, 4)
    assert corpus_wer([("a b", "a b"), ("c d", "")]) == pytest.approx(0.5)
    assert corpus_wer([("", "x")]) is None


def test_event_records_follow_the_protocol() -> None:
    final = Final(2, 16000, 40000, "Hi.", (Word("Hi.", 1.0, 1.5, 0.91234),), "en")
    assert event_record(final, stream=1, wall=2.34567) == {
        "type": "final",
        "utterance": 2,
        "start": 1.0,
        "end": 2.5,
        "text": "Hi.",
        "words": [{"word": "Hi.", "start": 1.0, "end": 1.5, "probability": 0.912}],
        "language": "en",
        "stream": 1,
        "wall": 2.346,
    }
    assert event_record(Partial(0, 0, 8000, "a b", "a"), stream=0, wall=0.0)["stable"] == "a"
    assert "words" not in event_record(Final(0, 0, 1, "x", (), "en"), stream=0, wall=0.0)
    assert event_record(Error("overloaded", "m"), stream=0, wall=0.0) == {
        "type": "error",
        "code": "overloaded",
        "message": "m",
        "stream": 0,
        "wall": 0.0,
    }
    assert event_record(Done(24000, 1, "idle"), stream=0, wall=1.0) == {
        "type": "done",
        "audio_seconds": 1.5,
        "utterances": 1,
        "reason": "idle",
        "stream": 0,
        "wall": 1.0,
    }


def test_stream_log_lags_and_lost_finals() -> None:
    log = StreamLog(0, [Clip("a", np.zeros(SR, dtype=np.float32), "x y")])
    log.fed = [(320 * (i + 1), 0.02 * (i + 1)) for i in range(50)]
    log.events = [
        (0.5, Partial(0, 0, 3200, "x", "")),
        (1.2, Final(0, 0, 8000, "x y", (), "en")),
        (1.3, Partial(1, 9600, 12800, "z", "")),
    ]
    log.endpoints = {0: 14400}
    assert log.partial_lags() == pytest.approx([0.3, 1.3 - 0.8])
    assert log.final_lags() == (pytest.approx([1.2 - 0.9]), pytest.approx([1.2 - 0.5]))
    assert log.lost_finals() == 1  # utterance 1 showed partials but has no final
    assert log.wall_at(10**9) is None


def test_rotations() -> None:
    clips = [Clip(n, np.zeros(1, dtype=np.float32)) for n in "abc"]
    assert [[c.name for c in r] for r in rotations(clips, 4)] == [
        list("abc"),
        list("bca"),
        list("cab"),
        list("abc"),
    ]


async def _simulate(realtime: bool, streams: int = 2) -> dict[str, object]:
    a = Clip(
        "a",
        scripted_audio([("voice", 1.5), ("silence", 0.7), ("voice", 1.0)]),
        "alpha bravo charlie alpha bravo",
    )
    b = Clip("b", scripted_audio([("voice", 2.0)]), "alpha bravo charlie delta")
    dec = FakeDecoder(batch_delay_s=0.01)
    records: list[dict[str, object]] = []
    async with Engine(dec) as engine:
        # Each utterance alone: the fake's words count from its window's start, so in
        # context its text would depend on the clip order (see test_session for context).
        result = await run_simulation(
            engine,
            rotations([a, b], streams),
            realtime=realtime,
            config=SessionConfig(context_s=0),
            on_event=records.append,
        )
    summary = result.summary
    assert summary["streams"] == streams and summary["finals_lost"] == 0
    assert summary["stable_revisions"] == 0
    assert summary["finals"] == 3 * streams
    assert records and {r["stream"] for r in records} == set(range(streams))
    assert all(r["type"] in {"partial", "final", "done"} for r in records)
    assert summary["partial_lag_s"]["n"] > 0
    return summary


async def test_fast_simulation_with_the_fake_model() -> None:
    summary = await _simulate(realtime=False)
    assert summary["wer"] is not None and float(summary["wer"]) < 0.3  # type: ignore[arg-type]
    assert summary["encoder_cache_hit_rate"] is not None


@pytest.mark.slow
async def test_realtime_simulation_keeps_the_audio_clock() -> None:
    summary = await _simulate(realtime=True, streams=1)
    # Real time: the run lasts as long as the audio (6.2 s with gaps), not much more.
    assert 6.0 <= float(summary["wall_s"]) < 12.0  # type: ignore[arg-type]
    lag = summary["partial_lag_s"]["p50"]  # type: ignore[index]
    assert 0.0 <= lag < 1.0


def test_cli_refuses_bad_arguments(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from kettle.streaming.cli.main import main

    assert main(["simulate", str(tmp_path / "missing.wav"), "--fast"]) == 2
    assert "missing.wav" in capsys.readouterr().err
    assert main(["simulate", "a.wav", "b.wav", "--reference", "x"]) == 2
    with pytest.raises(SystemExit) as usage:  # argparse refuses it: exit status 2
        main(["simulate", "a.wav", "--streams", "0"])
    assert usage.value.code == 2
    assert "--streams: must be at least 1" in capsys.readouterr().err


def test_manifest_lookup(tmp_path: Path) -> None:
    from kettle.streaming.cli.simulate import manifest_reference

    (tmp_path / "audio").mkdir()
    clip = tmp_path / "audio" / "x.wav"
    clip.write_bytes(b"")
    (tmp_path / "manifest.tsv").write_text("file\treference_text\naudio/x.wav\tHello there\n")
    assert manifest_reference(clip) == "Hello there"
    assert manifest_reference(tmp_path / "other.wav", tmp_path / "manifest.tsv") is None


@pytest.mark.slow
def test_cli_json_output_on_an_eval_clip(
    eval_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kettle.streaming.cli.main import main

    clip = eval_dir / "audio" / "ps__cards_001.wav"
    assert main(["simulate", str(clip), "--fast", "--json", "--threads", "2"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[-1]["type"] == "summary" and lines[-1]["stable_revisions"] == 0
    assert lines[-2]["type"] == "done"
    finals = [r for r in lines if r["type"] == "final"]
    assert finals and all(
        {"utterance", "start", "end", "text", "stream", "wall"} <= r.keys() for r in finals
    )
    assert lines[-1]["wer"] is not None
