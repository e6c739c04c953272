"""What the server serves with now: the engine (None until the model is loaded) and whether
it is draining. The one home of both facts: `KettleServer` writes them as its life goes on;
the gate, the connections, the uploads and the routes read them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kettle.streaming.protocols.base import ModelInfo
from kettle.streaming.server.upload_errors import UploadsUnavailable

if TYPE_CHECKING:
    from kettle.streaming.engine.engine import Engine


class Serving:
    def __init__(self, aliases: tuple[str, ...] = ()) -> None:
        """``aliases``: other model names OpenAI clients may send (ServerConfig's)."""
        self.engine: Engine | None = None
        self.draining = False  # shutting down or draining: no new sessions or uploads
        self._aliases = aliases

    @property
    def model_info(self) -> ModelInfo | None:
        """The model serving sessions; None while it loads."""
        engine = self.engine
        if engine is None:
            return None
        decoder, finals, refine = engine.decoder, engine.final_decoder, engine.refine_decoder
        return ModelInfo(
            decoder.name,
            decoder.multilingual,
            finals.name if finals is not decoder else None,
            refine.name if refine is not finals else None,
            self._aliases,
            speakers=engine.speakers is not None,
        )

    def upload_engine(self) -> Engine:
        """The engine, when the server takes uploads now; `UploadsUnavailable` otherwise."""
        engine = self.engine
        if self.draining:
            raise UploadsUnavailable("the server is shutting down")
        if engine is None:
            raise UploadsUnavailable("the model is loading")
        if not engine.healthy:
            stopped = not engine.model_failing
            raise UploadsUnavailable(
                "the engine has stopped" if stopped else "the model is failing"
            )
        return engine
