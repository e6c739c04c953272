"""The adapter and the engine on a CUDA device (run by benchmarks/gpu_check.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kettle.transcribe.types import DecodeKind, DecodeRequest

ctranslate2 = pytest.importorskip("ctranslate2")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(ctranslate2.get_cuda_device_count() < 1, reason="needs CUDA"),
]
JFK = Path(__file__).resolve().parents[2] / "data" / "jfk.flac"


@pytest.mark.parametrize("compute_type", ["int8_float16", "float16"])
def test_decodes_on_the_gpu_and_measures_cheap_batches(compute_type: str) -> None:
    from kettle.transcribe.audio.read import load_audio
    from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter

    adapter = WhisperAdapter(ModelConfig("tiny.en", device="cuda", compute_type=compute_type))
    audio = load_audio(JFK)
    requests = [
        DecodeRequest(audio=audio, kind=kind, request_id=i, beam_size=5 if i else 1)
        for i, kind in enumerate([DecodeKind.PARTIAL, DecodeKind.FINAL])
    ]
    results = adapter.decode_batch(requests)
    for result in results:
        assert "ask not what your country can do for you" in result.text.lower()
    profile = adapter.measure_costs()
    assert profile.device == "cuda"
    # On a GPU a batch of 8 encodes for much less than 8 single passes: the cost model
    # then fills batches.
    assert profile.encode(8) < 4 * profile.encode(1)


async def test_the_engine_serves_a_stream_on_the_gpu() -> None:
    from kettle.streaming.core.events import Final
    from kettle.streaming.engine.engine import Engine
    from kettle.transcribe.audio.read import load_audio
    from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter

    adapter = WhisperAdapter(ModelConfig("tiny.en", device="cuda"))
    audio = load_audio(JFK)
    async with Engine(adapter) as engine:
        stream = engine.open_stream()
        for i in range(0, len(audio), 3200):
            stream.feed_audio(audio[i : i + 3200])
        stream.stop()
        events = [e async for e in stream]
    text = " ".join(e.text for e in events if isinstance(e, Final)).lower()
    assert "your country" in text
