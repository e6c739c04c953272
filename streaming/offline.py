"""The engine as a `Decoder` for the file pipeline: uploads share the live engine.

The pipeline is synchronous and runs in a worker thread; each of its batches goes to
`Engine.decode_offline` on the engine's event loop (the lowest priority: live finals and
partials always go first) and the thread waits for the results.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kettle.transcribe.types import DecodeRequest, DecodeResult

if TYPE_CHECKING:
    from kettle.streaming.engine import Engine


class EngineDecoder:
    """A `Decoder` whose batches the engine runs at the offline priority. Call `decode_batch`
    from a thread other than the loop's (the pipeline's worker thread), never on the loop."""

    def __init__(self, engine: Engine, loop: asyncio.AbstractEventLoop) -> None:
        self._engine = engine
        self._loop = loop

    @property
    def name(self) -> str:
        return self._engine.final_decoder.name  # offline requests are finals

    @property
    def multilingual(self) -> bool:
        return self._engine.final_decoder.multilingual

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError("EngineDecoder.decode_batch would block the engine's own loop")
        future = asyncio.run_coroutine_threadsafe(
            self._engine.decode_offline(list(requests)), self._loop
        )
        return future.result()


__all__ = ["EngineDecoder"]
