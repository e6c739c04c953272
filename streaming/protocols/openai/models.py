"""The model names OpenAI's APIs take on kettle (REST and Realtime alike): the served models
and aliases of the default one (OpenAI's own model names, configurable with
``kettle serve --openai-aliases``), each with its dated variants (``NAME-YYYY-MM-DD``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kettle.streaming.protocols.openai.errors import model_not_found

MODEL_ALIAS = "whisper-1"
# What OpenAI's SDKs and the voice-agent plugins send by default (LiveKit's openai.STT:
# gpt-4o-mini-transcribe; Pipecat's OpenAISTTService: gpt-transcribe), and the Realtime-only
# models (Pipecat's OpenAIRealtimeSTTService: gpt-realtime-whisper); one list for REST and
# Realtime, so a name means the same on both.
MODEL_ALIASES = (
    MODEL_ALIAS,
    "gpt-4o-transcribe",
    "gpt-4o-mini-transcribe",
    "gpt-4o-transcribe-diarize",  # diarized_json answers need the server's speaker model
    "gpt-transcribe",
    "gpt-realtime-whisper",
    "gpt-live-transcribe",
)
_DATED = re.compile(r"^(?P<name>.+)-\d{4}-\d{2}-\d{2}$")  # e.g. gpt-4o-transcribe-2025-03-20


@dataclass(frozen=True)
class ModelEntry:
    id: str
    multilingual: bool
    created: int = 0
    owned_by: str = "kettle"

    def body(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "model",
            "created": self.created,
            "owned_by": self.owned_by,
        }


@dataclass(frozen=True)
class ModelCatalog:
    """The models an upload may name; the first is the default (the finals model), which
    each of ``aliases`` also names (and their dated variants, ``NAME-YYYY-MM-DD``)."""

    models: tuple[ModelEntry, ...]
    aliases: tuple[str, ...] = MODEL_ALIASES

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("a catalog needs at least one model")

    @property
    def default(self) -> ModelEntry:
        return self.models[0]

    def entries(self) -> list[ModelEntry]:
        """Every id a client may use, the aliases included (under the default's properties)."""
        default = self.default
        ids = {m.id for m in self.models}
        aliases = [
            ModelEntry(alias, default.multilingual, default.created, default.owned_by)
            for alias in self.aliases
            if alias not in ids
        ]
        return [*self.models, *aliases]

    def resolve(self, name: str) -> ModelEntry:
        """The model an id names (an alias gives the default), or a 404 error."""
        for entry in self.models:
            if entry.id == name:
                return entry
        dated = _DATED.match(name)
        if name in self.aliases or (dated is not None and dated["name"] in self.aliases):
            return self.default
        raise model_not_found(name)

    def get_body(self, name: str) -> dict[str, Any]:
        for entry in self.entries():
            if entry.id == name:
                return entry.body()
        entry = self.resolve(name)  # a dated alias: described under its own id
        return ModelEntry(name, entry.multilingual, entry.created, entry.owned_by).body()

    def list_body(self) -> dict[str, Any]:
        return {"object": "list", "data": [e.body() for e in self.entries()]}
