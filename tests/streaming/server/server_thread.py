"""A kettle server on 127.0.0.1:0 in a thread of its own, so that blocking clients (the
OpenAI SDK's sync client, code from the README) can talk to it from the test's thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from kettle.streaming.engine.engine import EngineConfig
from kettle.streaming.engine.speakers import SpeakerService
from kettle.streaming.server.server import DecoderLoad, KettleServer, ServerConfig

T = TypeVar("T")


class ServerThread:
    def __init__(
        self,
        config: ServerConfig,
        load: Callable[[], DecoderLoad],
        engine_config: EngineConfig | None = None,
        *,
        wait_for_model: bool = True,
        speakers: SpeakerService | None = None,
    ) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.server: KettleServer = self.run(self._make(config, load, engine_config, speakers))
        self.run(self.server.listen())
        self._loading = asyncio.run_coroutine_threadsafe(self.server.load(), self.loop)
        if wait_for_model:
            self._loading.result(300)

    @staticmethod
    async def _make(
        config: ServerConfig,
        load: Callable[[], DecoderLoad],
        engine_config: EngineConfig | None,
        speakers: SpeakerService | None,
    ) -> KettleServer:
        return KettleServer(config, load, engine_config, speakers=speakers)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 300) -> T:
        """Run a coroutine on the server's loop and wait for it (deadlock guard only)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def url(self) -> str:
        return self.server.url

    def close(self) -> None:
        try:
            self._loading.result(300)
            self.run(self.server.shutdown())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)
            self.loop.close()
