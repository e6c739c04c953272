"""A codec's lifecycle as a table: every allowed move goes where the table says, every other
move from every phase raises and changes nothing, and one codec of each vendor walks its
phases through the client's messages."""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

import pytest
from kettle.streaming.core.events import Error
from kettle.streaming.protocols.assemblyai.live import AssemblyAICodec
from kettle.streaming.protocols.assemblyai.wire import parse_query
from kettle.streaming.protocols.base import (
    AudioReceived,
    CodecContext,
    FeedAudio,
    Finalize,
    Limits,
    ModelInfo,
    Send,
    Stop,
)
from kettle.streaming.protocols.kettle_v1.live import KettleV1Codec
from kettle.streaming.protocols.kettle_v1.wire import StreamSettings
from kettle.streaming.protocols.lifecycle import (
    TRANSITIONS,
    CodecLifecycle,
    CodecPhase,
    IllegalTransition,
    Move,
)
from kettle.streaming.protocols.openai.realtime import RealtimeCodec

from tests.streaming.protocols.conftest import AllowAll

A, S, X = CodecPhase.AWAITING_AUDIO, CodecPhase.STREAMING, CodecPhase.STOPPED

# The whole table, written out: a change to the lifecycle shows here.
EXPECTED = {
    (A, Move.AUDIO): S,
    (S, Move.AUDIO): S,
    (A, Move.STOP): X,
    (S, Move.STOP): X,
    (X, Move.STOP): X,
}
ILLEGAL = [pair for pair in itertools.product(CodecPhase, Move) if pair not in EXPECTED]
MODEL = ModelInfo("tiny.en", False)
ALLOW = AllowAll()


def reach(phase: CodecPhase) -> CodecLifecycle:
    """A lifecycle brought to ``phase`` by allowed moves only."""
    life = CodecLifecycle()
    for move in {A: [], S: [Move.AUDIO], X: [Move.AUDIO, Move.STOP]}[phase]:
        life.move(move)
    assert life.phase is phase
    return life


def test_the_table_is_the_one_written_here() -> None:
    assert TRANSITIONS == EXPECTED


def test_a_lifecycle_starts_awaiting_audio() -> None:
    life = CodecLifecycle()
    assert life.phase is A and life.awaiting_audio and not life.streaming and not life.stopped


@pytest.mark.parametrize(("phase", "move", "after"), [(p, m, a) for (p, m), a in EXPECTED.items()])
def test_an_allowed_move_goes_where_the_table_says(
    phase: CodecPhase, move: Move, after: CodecPhase
) -> None:
    life = reach(phase)
    assert life.move(move) is after
    assert life.phase is after
    assert (life.awaiting_audio, life.streaming, life.stopped) == (
        after is A,
        after is S,
        after is X,
    )


@pytest.mark.parametrize(("phase", "move"), ILLEGAL)
def test_any_other_move_is_refused_and_changes_nothing(phase: CodecPhase, move: Move) -> None:
    life = reach(phase)
    with pytest.raises(IllegalTransition) as refused:
        life.move(move)
    assert (refused.value.phase, refused.value.move) == (phase, move)
    assert life.phase is phase


# -- one codec of each vendor walks its phases ---------------------------------------------


def context() -> CodecContext:
    return CodecContext("0123456789abcdef0123456789abcdef", MODEL, Limits(1 << 20, 20.0))


def sent_types(actions: list[Any]) -> list[str]:
    return [json.loads(a.message.text)["type"] for a in actions if isinstance(a, Send)]


def test_kettle_v1_takes_config_until_the_first_audio_and_leaves_stop_to_the_runner() -> None:
    codec = KettleV1Codec(context(), StreamSettings())
    assert codec.phase is A and not codec.audio_started
    assert codec.on_text('{"type": "config", "encoding": "mulaw"}', ALLOW) == []
    assert codec.on_binary(b"\x00\x00") == [FeedAudio(b"\x00\x00")]
    assert codec.phase is S and codec.audio_started
    assert sent_types(codec.on_text('{"type": "config", "channels": 2}', ALLOW)) == ["error"]
    assert codec.on_text('{"type": "stop"}', ALLOW) == [Stop()]
    assert codec.phase is S  # the connection stops reading, not the codec


def test_deepgram_live_answers_finalize_itself_before_audio_and_reads_nothing_after_close(
    live_codec: Any,
) -> None:
    driven = live_codec()
    codec = driven.codec
    assert codec.phase is A
    finalize = driven.text({"type": "Finalize"})
    assert not any(isinstance(a, Finalize) for a in finalize) and driven.sent  # answered here
    assert codec.on_binary(b"\x00\x00")[0] == FeedAudio(b"\x00\x00")
    assert codec.phase is S
    assert driven.text({"type": "Finalize"}) == [Finalize()]
    assert driven.text({"type": "CloseStream"}) == [Stop()]
    assert codec.phase is X
    assert codec.on_binary(b"\x00\x00") == [] and driven.text({"type": "Finalize"}) == []
    assert codec.phase is X


def test_deepgram_live_stops_at_an_empty_frame_before_any_audio(live_codec: Any) -> None:
    codec = live_codec().codec
    assert codec.on_binary(b"") == [Stop()]
    assert codec.phase is X


def test_deepgram_flux_stops_at_close_stream_and_at_a_fatal_client_message(
    flux_codec: Any,
) -> None:
    driven = flux_codec()
    codec = driven.codec
    assert codec.phase is A
    assert codec.on_binary(b"") == [] and codec.phase is A  # an empty frame is nothing
    assert codec.on_binary(b"\x00\x00")[0] == FeedAudio(b"\x00\x00")
    assert codec.phase is S
    assert driven.text({"type": "CloseStream"}) == [Stop()]
    assert codec.phase is X
    assert codec.on_binary(b"\x00\x00") == [] and driven.text("not json") == []

    other = flux_codec().codec
    assert other.on_text("not json", ALLOW) == [Stop("client error")]
    assert other.phase is X


def test_assemblyai_stops_at_terminate_and_again_at_an_engine_error() -> None:
    codec = AssemblyAICodec(context(), parse_query("", multilingual=False))
    assert codec.phase is A
    assert codec.on_text('{"type": "ForceEndpoint"}', ALLOW) == []  # no audio: no turn
    assert codec.on_binary(bytes(3200)) == [FeedAudio(bytes(3200))]  # 100 ms
    assert codec.phase is S
    assert codec.on_text('{"type": "ForceEndpoint"}', ALLOW) == [Finalize()]
    assert codec.on_text('{"type": "Terminate"}', ALLOW) == [Stop()]
    assert codec.phase is X
    assert codec.on_binary(bytes(3200)) == [] and codec.on_text("{}", ALLOW) == []
    # An engine's fatal error after the Terminate: the second stop the table allows.
    (error,) = codec.on_event(Error("internal", "boom", fatal=True), AudioReceived())
    assert isinstance(error, Send) and error.message.closing
    assert codec.phase is X


def test_openai_realtime_opens_the_stream_at_the_first_append() -> None:
    codec = RealtimeCodec(context())
    assert codec.phase is A and not codec.audio_started
    empty = {"type": "input_audio_buffer.append", "audio": ""}
    assert codec.on_event_object(empty, ALLOW) == [] and codec.phase is A  # no audio in it
    audio = base64.b64encode(bytes(4800)).decode()
    append = {"type": "input_audio_buffer.append", "audio": audio}
    assert codec.on_event_object(append, ALLOW) == [FeedAudio(bytes(4800))]
    assert codec.phase is S and codec.audio_started
    assert codec.on_event_object(append, ALLOW) == [FeedAudio(bytes(4800))]
    assert codec.phase is S  # the session's end is the runner's: it never stops
