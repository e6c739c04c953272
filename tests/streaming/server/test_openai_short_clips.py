"""Issue 37: a REST upload of a short clip is read as well as the model can read it, and no
upload comes back as a repeated-token loop ("s s s s").

A real `kettle serve` (its defaults: tiny.en) as a subprocess; each clip is posted alone as a
16 kHz WAV with the official OpenAI SDK. Clips: the speech manifest's short ones (under 3.5 s;
tests/data/speech, or $KETTLE_EVAL_DIR) and JFK cut into fragments as Pipecat's
OpenAISTTService posts them after its default Silero VAD. Plain faster-whisper (the same
tiny.en, int8, beam 5) reads the same clips; kettle's WER must be within 5 points (about one
word) of it. The two paths' texts are never compared exactly: the same int8 model can round
differently on AVX2 and AVX-512.

The clip builders, readers and scoring are benchmarks/bench_short_clips.py's, which runs the
eval set's command_short clips."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EvalClip

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from _serve import kettle_serving
from bench_short_clips import (
    Clip,
    corpus_wer,
    jfk_fragments,
    plain_all,
    plain_model,
    post_all,
    token_loops,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),  # the model's start and ~16 short clips read twice
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]

KEY = "short-clips-key"
SHORT_S = 3.5  # a clip shorter than this is a short clip
POINTS = 5.0  # kettle's WER at most plain faster-whisper's + this (one word of slack)


@pytest.fixture(scope="module")
def model() -> Any:
    return plain_model()


@pytest.fixture(scope="module")
def groups(eval_clips: list[EvalClip], model: Any) -> dict[str, list[Clip]]:
    from kettle.transcribe.audio.read import RawFormat, load_audio

    short = []
    for c in eval_clips:
        if c.duration_s < SHORT_S:
            raw = RawFormat.parse("s16le:16000:1") if c.path.suffix == ".raw" else None
            short.append(Clip(c.path.name, load_audio(c.path, raw=raw), c.reference))
    assert len(short) >= 6
    return {"short": short, "jfk_fragments": jfk_fragments(model)}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `kettle serve` with its defaults, as users run it (a subprocess)."""
    keys = tmp_path_factory.mktemp("keys") / "keys"
    keys.write_text(KEY + "\n")
    with kettle_serving(["--api-key-file", str(keys)]) as (_, url):
        yield url


@pytest.fixture(scope="module")
def kettle_texts(base: str, groups: dict[str, list[Clip]]) -> dict[str, list[str]]:
    return {g: post_all(base, clips, key=KEY) for g, clips in groups.items()}


@pytest.fixture(scope="module")
def plain_texts(model: Any, groups: dict[str, list[Clip]]) -> dict[str, list[str]]:
    return {g: plain_all(model, clips) for g, clips in groups.items()}


def test_jfk_cut_into_fragments(groups: dict[str, list[Clip]]) -> None:
    fragments = groups["jfk_fragments"]
    assert len(fragments) >= 3  # Pipecat's VAD cuts inside the sentence
    assert all(f.seconds < 4.0 and f.reference for f in fragments)


@pytest.mark.parametrize("group", ["short", "jfk_fragments"])
def test_no_token_loop(
    group: str, groups: dict[str, list[Clip]], kettle_texts: dict[str, list[str]]
) -> None:
    loops = {
        c.name: (text, token_loops(text))
        for c, text in zip(groups[group], kettle_texts[group], strict=True)
        if token_loops(text)
    }
    assert not loops


@pytest.mark.parametrize("group", ["short", "jfk_fragments"])
def test_wer_no_worse_than_plain_faster_whisper(
    group: str,
    groups: dict[str, list[Clip]],
    kettle_texts: dict[str, list[str]],
    plain_texts: dict[str, list[str]],
) -> None:
    refs = [c.reference for c in groups[group]]
    got = 100 * corpus_wer(refs, kettle_texts[group])
    plain = 100 * corpus_wer(refs, plain_texts[group])
    texts = list(zip(refs, kettle_texts[group], plain_texts[group], strict=True))
    assert got <= plain + POINTS, (got, plain, texts)
