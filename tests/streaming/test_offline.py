"""The engine as the file pipeline's decoder: the same transcript as the model alone."""

from __future__ import annotations

import asyncio

import pytest
from kettle.streaming.engine import Engine, EngineConfig
from kettle.streaming.offline import EngineDecoder
from kettle.transcribe.fake import FakeDecoder, scripted_audio
from kettle.transcribe.pipeline import PipelineConfig, transcribe_audio
from kettle.transcribe.types import DecodeKind, DecodeRequest

AUDIO = scripted_audio(
    [("silence", 0.5), ("voice", 2.0), ("silence", 1.0), ("voice", 3.0), ("silence", 0.5)]
)


async def test_pipeline_through_the_engine_equals_the_model_alone() -> None:
    config = PipelineConfig(word_timestamps=True, batch_size=2)
    direct = transcribe_audio(AUDIO, FakeDecoder(), config)
    async with Engine(FakeDecoder(name="fake-finals"), EngineConfig()) as engine:
        decoder = EngineDecoder(engine, asyncio.get_running_loop())
        assert decoder.name == "fake-finals" and decoder.multilingual is False
        via_engine = await asyncio.to_thread(transcribe_audio, AUDIO, decoder, config)
        # On the loop itself it would wait for itself: refused rather than hung.
        request = DecodeRequest(AUDIO[:16000], DecodeKind.FINAL)
        with pytest.raises(RuntimeError, match="block"):
            decoder.decode_batch([request])
    assert via_engine.text == direct.text and via_engine.text
    assert via_engine.segments == direct.segments
