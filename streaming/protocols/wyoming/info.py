"""What a Wyoming ``describe`` is answered with: one ASR program, kettle, with its model. No I/O."""

from __future__ import annotations

from importlib import metadata

from kettle.streaming.protocols.base import ModelInfo
from kettle.transcribe.model.languages import LANGUAGES
from wyoming.info import AsrModel, AsrProgram, Attribution, Info

# kettle has no public home page to name; the model is credited to its authors.
KETTLE = Attribution(name="kettle", url="")
WHISPER = Attribution(name="OpenAI Whisper", url="https://github.com/openai/whisper")


def version() -> str:
    try:
        return metadata.version("kettle")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "0"


def languages(model: ModelInfo) -> list[str]:
    """The languages a client may ask for: Whisper's on a multilingual model, else English."""
    return sorted(LANGUAGES) if model.multilingual else ["en"]


def describe(model: ModelInfo) -> Info:
    """kettle as Home Assistant lists it: streaming transcripts, the served model."""
    asr_model = AsrModel(
        name=model.name,
        attribution=WHISPER,
        installed=True,
        description=f"Whisper {model.name} (CTranslate2 int8), streaming",
        version=None,
        languages=languages(model),
    )
    program = AsrProgram(
        name="kettle",
        attribution=KETTLE,
        installed=True,
        description="kettle streaming speech-to-text",
        version=version(),
        models=[asr_model],
        supports_transcript_streaming=True,
    )
    return Info(asr=[program])


__all__ = ["describe", "languages", "version"]
