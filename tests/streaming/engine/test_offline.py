"""The engine as the file pipeline's decoder (offline.py): the same transcript as the model
alone, and a 10-minute upload shares the model with a live stream without delaying its finals.
For the latter a fake model whose offline batches take a while stands in for the real one;
what is checked is the order of batches, never how long anything took."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import pytest
from kettle.streaming.core.events import Done, Final
from kettle.streaming.core.session import SessionConfig
from kettle.streaming.engine.engine import Engine, EngineConfig
from kettle.streaming.engine.offline import EngineDecoder, transcribe_offline
from kettle.transcribe.errors import KettleError
from kettle.transcribe.files.pipeline import PipelineConfig, transcribe_audio
from kettle.transcribe.files.windows import WindowConfig
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.types import DecodeKind, DecodeRequest, DecodeResult

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


FAST = PipelineConfig(windows=WindowConfig(vad=False), recover_depth=0)


class Recorder(FakeDecoder):
    """Counts offline batches (requests without a stream) as they start; each takes 0.1 s,
    so a 10-minute file is several seconds of work. Notes, for every live final request, how
    many offline batches had started when its batch started."""

    def __init__(self) -> None:
        super().__init__()
        self.offline_started = 0
        self.live_final_at: dict[int, int] = {}  # utterance ordinal -> offline batches before
        self.first_offline = threading.Event()
        self._count_lock = threading.Lock()

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        offline = any(r.stream_key is None for r in requests)
        with self._count_lock:
            if offline:
                self.offline_started += 1
            for r in requests:
                if r.stream_key is not None and r.kind is DecodeKind.FINAL:
                    assert isinstance(r.cache_key, tuple)
                    # (stream, ordinal, window start, window end): a final's window starts
                    # before its utterance when it is decoded in context.
                    self.live_final_at[r.cache_key[1]] = self.offline_started
        if offline:
            self.first_offline.set()
            time.sleep(0.1)
        return super().decode_batch(requests)


async def test_a_ten_minute_upload_does_not_delay_live_finals() -> None:
    decoder = Recorder()
    ten_minutes = scripted_audio([("voice", 8.0), ("silence", 2.0)] * 60)
    async with Engine(decoder) as engine:
        upload = asyncio.ensure_future(transcribe_offline(engine, ten_minutes, FAST))
        assert await asyncio.to_thread(decoder.first_offline.wait, 60)
        stream = engine.open_stream(SessionConfig())
        live = scripted_audio([("silence", 0.5), ("voice", 2.0), ("silence", 1.0),
                               ("voice", 1.5), ("silence", 1.5)])  # fmt: skip
        marks: list[tuple[int, int]] = []  # (stream position, offline batches started)
        for pos in range(0, len(live), 1600):
            stream.feed_audio(live[pos : pos + 1600])
            marks.append((min(pos + 1600, len(live)), decoder.offline_started))
            await asyncio.sleep(0)
        stream.stop()
        finals = []
        async with asyncio.timeout(120):  # deadlock guard only
            async for event in stream:
                if isinstance(event, Final):
                    finals.append(event)
                if isinstance(event, Done):
                    break
        assert len(finals) == 2
        assert not upload.done(), "the upload ran all along, so it competed with the finals"
        for final in finals:
            endpoint = stream.endpoint_sample(final.utterance)
            assert endpoint is not None
            at_endpoint = next(count for pos, count in marks if pos >= endpoint)
            # At most the one offline batch already running came between the end of the
            # utterance and the decode of its final.
            # Every utterance here has a final, so ordinals and numbers agree.
            assert decoder.live_final_at[final.utterance] - at_endpoint <= 1
        transcript = await upload
    assert transcript.duration_s == pytest.approx(600.0)
    assert len(transcript.text.split()) > 500


async def test_cancelling_the_caller_withdraws_the_rest() -> None:
    decoder = Recorder()
    async with Engine(decoder) as engine:
        upload = asyncio.ensure_future(
            transcribe_offline(
                engine, scripted_audio([("voice", 8.0), ("silence", 2.0)] * 60), FAST
            )
        )
        assert await asyncio.to_thread(decoder.first_offline.wait, 60)
        upload.cancel()
        with pytest.raises(asyncio.CancelledError):
            await upload
        started = decoder.offline_started
    assert started < 60 // 2  # nowhere near the whole file was decoded


async def test_engine_decoder_refuses_work_once_cancelled() -> None:
    async with Engine(FakeDecoder(name="m"), EngineConfig()) as engine:
        decoder = EngineDecoder(engine, asyncio.get_running_loop())
        decoder.cancel()
        with pytest.raises(KettleError):
            await asyncio.to_thread(decoder.decode_batch, [])
