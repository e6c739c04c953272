"""benchmarks/_ttfs_clients.py's listeners: which server message is a turn's final on each
surface, and which are interims or earlier pieces of its text."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import numpy as np
from _ttfs_clients import (
    AssemblyAIForceEndpoint,
    DeepgramEndpoint,
    FluxEndOfTurn,
    Heard,
    OpenAIServerVad,
    join_turns,
    surfaces,
)
from _ttfs_turns import SR, Turn

END = 10.0  # the end of speech, seconds on the turn's audio clock


def results(start: float, duration: float, **flags: bool) -> dict[str, Any]:
    alternatives = [{"transcript": "words"}]
    return {
        "type": "Results",
        "is_final": flags.get("is_final", True),
        "speech_final": flags.get("speech_final", False),
        "from_finalize": flags.get("from_finalize", False),
        "start": start,
        "duration": duration,
        "channel": {"alternatives": alternatives},
    }


def test_every_surface_is_spoken() -> None:
    assert set(surfaces()) == {"deepgram", "endpoint", "openai", "openai_vad", "flux", "assemblyai"}
    assert surfaces()["assemblyai"].stop == {"type": "ForceEndpoint"}
    assert surfaces()["flux"].stop is None and surfaces()["openai_vad"].stop is None


def test_endpoint_final_is_the_speech_final_that_reaches_the_end() -> None:
    listener = DeepgramEndpoint(END)
    assert listener.hear(results(0, 4, is_final=False), 0) == Heard(interim=True)
    assert listener.hear(results(0, 4, speech_final=True), 0) == Heard(final_text="words")
    assert listener.hear(results(4, 5.8, speech_final=True), 0) == Heard(
        final_text="words", last=True
    )


def test_server_vad_final_is_the_item_whose_speech_stopped_at_the_end() -> None:
    listener = OpenAIServerVad(END)
    done = "conversation.item.input_audio_transcription.completed"
    listener.hear(
        {"type": "input_audio_buffer.speech_stopped", "item_id": "a", "audio_end_ms": 4000}, 0
    )
    listener.hear(
        {"type": "input_audio_buffer.speech_stopped", "item_id": "b", "audio_end_ms": 9900}, 0
    )
    assert listener.hear({"type": done, "item_id": "a", "transcript": "one"}, 0) == Heard(
        final_text="one"
    )
    assert listener.hear({"type": done, "item_id": "b", "transcript": "two"}, 0) == Heard(
        final_text="two", last=True
    )


def test_flux_final_is_the_end_of_turn_that_reaches_the_end() -> None:
    listener = FluxEndOfTurn(END)
    info = {"type": "TurnInfo", "transcript": "t"}
    assert listener.hear(info | {"event": "Update", "audio_window_end": 3.0}, 0) == Heard(
        interim=True
    )
    assert listener.hear(info | {"event": "EndOfTurn", "audio_window_end": 5.0}, 0) == Heard(
        final_text="t"
    )
    assert listener.hear(info | {"event": "EndOfTurn", "audio_window_end": 9.8}, 0) == Heard(
        final_text="t", last=True
    )


def test_assemblyai_final_is_the_formatted_end_of_turn_after_force_endpoint() -> None:
    listener = AssemblyAIForceEndpoint(END)
    # An earlier turn, ended at a pause before the client's ForceEndpoint: a piece of text.
    early = {"type": "Turn", "end_of_turn": True, "words": [{"start": 2000, "end": 4000}]}
    assert listener.hear(early | {"turn_is_formatted": False, "transcript": "so"}, 0.9) is None
    piece = listener.hear(early | {"turn_is_formatted": True, "transcript": "So."}, 1.0)
    assert piece == Heard(final_text="So.", last=False) and listener.extra == {}
    listener.stopped = True
    # The answer: its last word ends 0.4 s before the speech (Whisper's early word end).
    words = [{"start": 9000, "end": 9600}]
    turn = {"type": "Turn", "end_of_turn": True, "words": words}
    plain = turn | {"turn_is_formatted": False, "transcript": "hello there"}
    formatted = turn | {"turn_is_formatted": True, "transcript": "Hello there."}
    assert listener.hear(plain, 1.5) is None
    assert listener.extra == {"unformatted_at": 1.5}
    assert listener.hear(formatted, 1.6) == Heard(final_text="Hello there.", last=True)


def test_a_conversation_is_the_turns_with_the_gap_after_each() -> None:
    def turn(name: str, seconds: float, value: float) -> Turn:
        audio = np.full(int(seconds * SR), value, np.float32)
        return Turn(name, audio, name, 0.5, seconds - 0.5, (name,), "s")

    audio, starts = join_turns([turn("a", 2.0, 0.1), turn("b", 1.5, 0.2)], 3.0)
    assert starts == [0.0, 5.0]
    assert audio.shape[0] == int(9.5 * SR)
    assert audio[int(1.9 * SR)] == np.float32(0.1) and audio[int(2.1 * SR)] == 0.0
    assert audio[int(5.1 * SR)] == np.float32(0.2) and audio[-1] == 0.0
