"""What the protocol tests share: each API's message models, by message type, from the
clients' own packages (the deepgram SDK's listen v1 and v2 types, Pipecat's AssemblyAI
models), and a rate gate that answers what a test says."""

from __future__ import annotations

from typing import Any

from deepgram.listen.v1.types import (
    ListenV1ConfigureFailure,
    ListenV1ConfigureSuccess,
    ListenV1Error,
    ListenV1Metadata,
    ListenV1Results,
    ListenV1SpeechStarted,
    ListenV1UtteranceEnd,
)
from deepgram.listen.v2.types import (
    ListenV2ConfigureFailure,
    ListenV2ConfigureSuccess,
    ListenV2Connected,
    ListenV2FatalError,
    ListenV2TurnInfo,
    ListenV2Warning,
)
from pipecat.services.assemblyai.models import (
    BeginMessage,
    SpeechStartedMessage,
    TerminationMessage,
    TurnMessage,
)

# Deepgram live (/v1/listen): the SDK's message models, validated strictly (pydantic v2).
DEEPGRAM_V1_MODELS: dict[str, Any] = {
    "Results": ListenV1Results,
    "Metadata": ListenV1Metadata,
    "SpeechStarted": ListenV1SpeechStarted,
    "UtteranceEnd": ListenV1UtteranceEnd,
    "Error": ListenV1Error,
    "ConfigureFailure": ListenV1ConfigureFailure,
    "ConfigureSuccess": ListenV1ConfigureSuccess,
}

# Deepgram Flux (/v2/listen).
FLUX_MODELS: dict[str, Any] = {
    "Connected": ListenV2Connected,
    "TurnInfo": ListenV2TurnInfo,
    "ConfigureSuccess": ListenV2ConfigureSuccess,
    "ConfigureFailure": ListenV2ConfigureFailure,
    "Warning": ListenV2Warning,
    "Error": ListenV2FatalError,
}

# AssemblyAI v3 (/v3/ws): Pipecat's pydantic models of its messages (it has none for Error).
ASSEMBLYAI_MODELS: dict[str, Any] = {
    "Begin": BeginMessage,
    "Turn": TurnMessage,
    "SpeechStarted": SpeechStartedMessage,
    "Termination": TerminationMessage,
}


class Gate:
    """The connection's rate gate, answering what the test says."""

    def __init__(self, verdict: str = "allow") -> None:
        self.verdict = verdict

    def check(self) -> str:
        return self.verdict
