"""The AssemblyAI v3 codec on scripted events: query parsing, credentials, message shapes
(checked against Pipecat's own message models), turn order, word_is_final, format_turns
pairs, ForceEndpoint, UpdateConfiguration, Terminate, and error closes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from kettle.streaming.core.backlog import FINAL, PARTIAL
from kettle.streaming.core.events import (
    Done,
    Error,
    Final,
    NoTranscript,
    Partial,
    SpeechStarted,
    SpeechStopped,
)
from kettle.streaming.protocols.assemblyai import live as assemblyai
from kettle.streaming.protocols.assemblyai.live import (
    AssemblyAICodec,
    partial_confidence,
    turn_confidence,
)
from kettle.streaming.protocols.assemblyai.wire import (
    StreamParams,
    TurnSettings,
    parse_query,
)
from kettle.streaming.protocols.base import (
    Action,
    AudioReceived,
    CodecContext,
    FeedAudio,
    Finalize,
    Limits,
    ModelInfo,
    Reconfigure,
    Send,
    Stop,
)
from kettle.streaming.protocols.handshake import HandshakeRefused, HandshakeRequest
from kettle.streaming.protocols.params import ParamError
from kettle.transcribe.types import SAMPLE_RATE, Word

from tests.streaming.protocols.api_models import ASSEMBLYAI_MODELS, Gate

SR = SAMPLE_RATE
SESSION = "0123456789abcdef0123456789abcdef"
RECEIVED = AudioReceived()
MODELS = ASSEMBLYAI_MODELS  # Pipecat's pydantic models of AssemblyAI's messages


ALLOW = Gate()


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def codec(
    query: str = "", *, clock: Clock | None = None, multilingual: bool = False
) -> AssemblyAICodec:
    context = CodecContext(SESSION, ModelInfo("tiny.en", multilingual), Limits(max_session_s=3600))
    return AssemblyAICodec(
        context, parse_query(query, multilingual=multilingual), clock=clock or Clock()
    )


def sent(actions: Sequence[Action]) -> list[dict[str, Any]]:
    """The JSON of every Send, each validated by Pipecat's model where it has one."""
    out = []
    for action in actions:
        assert isinstance(action, Send)
        obj = json.loads(action.message.text)
        if obj["type"] in MODELS:
            MODELS[obj["type"]].model_validate(obj)
        out.append(obj)
    return out


def words(*spec: tuple[str, float, float]) -> tuple[Word, ...]:
    return tuple(Word(w, s, e, 0.9) for w, s, e in spec)


HELLO = words((" Hello,", 0.5, 0.9), (" world.", 1.0, 1.4))


def final(
    text: str = " Hello, world.",
    ws: tuple[Word, ...] = HELLO,
    *,
    start: int = 0,
    reason: str = "endpoint",
) -> Final:
    return Final(0, start, start + 2 * SR, text, ws, "en", reason=reason)


# -- the handshake ------------------------------------------------------------------------


def test_query_defaults_and_plugin_urls() -> None:
    p = parse_query("", multilingual=False)
    assert (p.encoding, p.sample_rate, p.speech_model, p.format_turns) == (
        "pcm_s16le",
        16000,
        "universal-streaming-english",
        False,
    )
    assert not p.u3 and p.language == "en"
    # What LiveKit's plugin sends by default (u3 family, silences 100/100, a JSON list).
    livekit = (
        "sample_rate=16000&encoding=pcm_s16le&speech_model=universal-3-6-pro&"
        "min_turn_silence=100&max_turn_silence=100&language_detection=true&"
        "keyterms_prompt=%5B%22kettle%22%2C+%22Whisper%22%5D&vad_threshold=0.5&prompt=hi"
    )
    p = parse_query(livekit, multilingual=False)
    assert p.u3 and p.keyterms == ("kettle", "Whisper") and p.language_detection
    assert p.session_config().endpoint_silence_ms == 200  # 100 ms floored at 200
    # Pipecat's: format_turns=true and its own extra parameters, accepted and ignored.
    pipecat = (
        "sample_rate=8000&encoding=pcm_mulaw&speech_model=universal-3-6-pro&formatted_finals=true&"
        "min_turn_silence=100&max_turn_silence=100&format_turns=true&continuous_partials=true"
    )
    p = parse_query(pipecat, multilingual=False)
    assert (p.encoding, p.sample_rate, p.format_turns, p.frame_bytes) == (
        "pcm_mulaw",
        8000,
        True,
        1,
    )


def test_keyterms_repeated_or_json() -> None:
    p = parse_query(
        "keyterms_prompt=alpha&keyterms_prompt=beta%20gamma&keyterms_prompt=alpha",
        multilingual=False,
    )
    assert p.keyterms == ("alpha", "beta gamma")


@pytest.mark.parametrize(
    ("threshold", "low", "high", "expected"),
    [
        (None, None, None, 752),  # AssemblyAI's defaults: 400 + 0.4 * (1280 - 400)
        (0.0, 300, 2000, 300),  # always confident: the minimum
        (1.0, 160, None, 1280),  # Pipecat's "no semantic turn detection": the maximum
        (0.5, 1000, 500, 1000),  # a maximum under the minimum is the minimum
        (None, 20000, 30000, 10000),  # capped
    ],
)
def test_endpoint_from_turn_settings(
    threshold: float | None, low: int | None, high: int | None, expected: int
) -> None:
    assert TurnSettings(threshold, low, high).endpoint_ms(u3=False) == expected


def test_u3_defaults() -> None:
    assert TurnSettings().endpoint_ms(u3=True) == 460  # 100 + 0.4 * (1000 - 100)


@pytest.mark.parametrize(
    "query",
    [
        "encoding=opus",
        "sample_rate=4000",
        "sample_rate=abc",
        "speech_model=nova-3",
        "format_turns=maybe",
        "end_of_turn_confidence_threshold=2",
        "max_turn_silence=-5",
        "keyterms_prompt=%5Bbroken",
        "language_codes=%5B%22es%22%5D",  # English-only model
        "sample_rate=8000&sample_rate=16000",
    ],
)
def test_bad_queries_are_400(query: str) -> None:
    with pytest.raises(ParamError):  # (AssemblyAIParamError's base, the shared parsers')
        parse_query(query, multilingual=False)
    with pytest.raises(HandshakeRefused) as refused:
        assemblyai.prepare(HandshakeRequest(assemblyai.PATH, query), ModelInfo("tiny.en", False))
    assert refused.value.status == 400


def test_languages_on_a_multilingual_model() -> None:
    assert parse_query("language_codes=%5B%22es%22%5D", multilingual=True).language == "es"
    assert (
        parse_query("language_codes=%5B%22es%22%2C%22en%22%5D", multilingual=True).language is None
    )
    assert parse_query("speech_model=universal-3-6-pro", multilingual=True).language is None
    assert parse_query("", multilingual=True).language == "en"  # the English model
    assert parse_query("speech_model=u3-rt-pro", multilingual=False).language == "en"


def test_credentials_and_refusal_body() -> None:
    request = HandshakeRequest(assemblyai.PATH, "token=tok", {"authorization": " key1 "})
    assert assemblyai.credentials(request) == ("key1", None, "tok")
    bearer = HandshakeRequest(assemblyai.PATH, "", {"authorization": "Bearer key2"})
    assert assemblyai.credentials(bearer) == ("Bearer key2", "key2", None)
    assert assemblyai.credentials(HandshakeRequest(assemblyai.PATH)) == (None, None, None)
    body, kind = assemblyai.refusal(401, "a valid API key is required")
    assert kind == "application/json" and json.loads(body) == {
        "error": "a valid API key is required"
    }


# -- messages -----------------------------------------------------------------------------


def test_begin_and_termination() -> None:
    clock = Clock(1_000_000.4)
    c = codec(clock=clock)
    begin = sent(c.start())[0]
    assert begin == {
        "type": "Begin",
        "id": "01234567-89ab-cdef-0123-456789abcdef",
        "expires_at": 1_003_600,
    }
    assert c.on_binary(b"\x00" * 32000) == [FeedAudio(b"\x00" * 32000)]
    clock.now += 7.6
    (done,) = c.on_event(Done(SR, 0), RECEIVED)
    assert isinstance(done, Send) and done.message.closing and done.message.close_code is None
    assert sent([done])[0] == {
        "type": "Termination",
        "audio_duration_seconds": 1,
        "session_duration_seconds": 8,
    }


def test_u3_partials_and_final() -> None:
    c = codec("speech_model=universal-3-6-pro&format_turns=true")
    assert sent(c.on_event(SpeechStarted(8000), RECEIVED)) == [
        {"type": "SpeechStarted", "timestamp": 500}
    ]
    (p,) = c.on_event(Partial(0, 8000, 24000, " Hello, wor", " Hello,"), RECEIVED)
    assert isinstance(p, Send) and p.message.kind == PARTIAL
    turn = sent([p])[0]
    assert turn["turn_order"] == 0 and not turn["end_of_turn"] and not turn["turn_is_formatted"]
    assert turn["transcript"] == "Hello, wor"
    assert [(w["text"], w["word_is_final"]) for w in turn["words"]] == [
        ("Hello,", True),
        ("wor", False),
    ]
    assert [(w["start"], w["end"]) for w in turn["words"]] == [(500, 1000), (1000, 1500)]
    assert turn["end_of_turn_confidence"] == 0.0 and turn["utterance"] == ""
    c.on_event(Partial(0, 8000, 32000, " Hello, world.", " Hello,"), RECEIVED)
    out = c.on_event(final(start=8000), RECEIVED)
    (eot,) = sent(out)  # one formatted end of turn: format_turns changes nothing on u3
    assert isinstance(out[0], Send) and out[0].message.kind == FINAL
    assert eot["end_of_turn"] and eot["turn_is_formatted"] and eot["turn_order"] == 0
    assert eot["transcript"] == eot["utterance"] == "Hello, world."
    assert eot["words"] == [
        {"start": 500, "end": 900, "text": "Hello,", "confidence": 0.9, "word_is_final": True},
        {"start": 1000, "end": 1400, "text": "world.", "confidence": 0.9, "word_is_final": True},
    ]
    assert eot["end_of_turn_confidence"] == 1.0  # pause + punctuation + agreed with the partial
    assert "language_code" not in eot
    # The next utterance is the next turn.
    (nxt,) = sent(c.on_event(Partial(1, 5 * SR, 6 * SR, " Again", ""), RECEIVED))
    assert nxt["turn_order"] == 1


def test_universal_partials_hold_final_words_only() -> None:
    c = codec("speech_model=universal-streaming-english")
    (turn,) = sent(c.on_event(Partial(0, 0, 2 * SR, " Hello, my friend", " Hello, my"), RECEIVED))
    assert turn["transcript"] == "hello my"
    assert [(w["text"], w["word_is_final"]) for w in turn["words"]] == [
        ("hello", True),
        ("my", True),
        ("friend", False),
    ]
    assert turn["end_of_turn_confidence"] == 0.0


def test_format_turns_pair() -> None:
    c = codec("format_turns=true&language_detection=true")
    c.on_event(Partial(0, 0, 2 * SR, " Hello, world.", " Hello, world."), RECEIVED)
    plain, formatted = sent(c.on_event(final(), RECEIVED))
    assert (plain["turn_is_formatted"], formatted["turn_is_formatted"]) == (False, True)
    assert plain["end_of_turn"] and formatted["end_of_turn"]
    assert plain["turn_order"] == formatted["turn_order"] == 0
    assert plain["transcript"] == plain["utterance"] == "hello world"
    assert [w["text"] for w in plain["words"]] == ["hello", "world"]
    assert formatted["transcript"] == "Hello, world." and formatted["utterance"] == ""
    assert plain["language_code"] == formatted["language_code"] == "en"
    # Without format_turns: the unformatted end of turn alone.
    (only,) = sent(codec().on_event(final(), RECEIVED))
    assert not only["turn_is_formatted"] and only["transcript"] == "hello world"


def test_empty_utterances_give_their_number_away() -> None:
    c = codec("speech_model=u3-rt-pro")
    sent(c.on_event(Partial(0, 0, SR, " Um", ""), RECEIVED))
    assert c.on_event(NoTranscript(0), RECEIVED) == []
    assert c.on_event(Partial(1, 2 * SR, 3 * SR, " ", ""), RECEIVED) == []  # no words: no Turn
    (eot,) = sent(c.on_event(final(start=4 * SR), RECEIVED))
    assert eot["turn_order"] == 0
    assert c.on_event(SpeechStopped(0, SR, "endpoint"), RECEIVED) == []


@pytest.mark.parametrize(
    ("reason", "text", "agrees", "expected"),
    [
        ("finalize", "hello", False, 1.0),
        ("stop", "hello", False, 1.0),
        ("endpoint", "Hello.", True, 1.0),
        ("endpoint", "Hello.", False, 0.75),
        ("endpoint", "hello", False, 0.5),
        ("max_length", "Hello?", True, 0.5),
        ("max_length", "and then", False, 0.0),
    ],
)
def test_turn_confidence(reason: str, text: str, agrees: bool, expected: float) -> None:
    assert turn_confidence(reason, text, agrees) == expected


def test_partial_confidence_stays_under_the_default_threshold() -> None:
    assert partial_confidence('He said "stop."', True) == 0.35
    assert partial_confidence("and so", False) == 0.0


def test_forced_end_of_turn_is_certain() -> None:
    c = codec("speech_model=u3-rt-pro")
    c.on_binary(b"\x00" * 3200)
    assert c.on_text('{"type": "ForceEndpoint"}', ALLOW) == [Finalize()]
    c.on_event(Partial(0, 0, SR, " Hello", " Hello"), RECEIVED)
    (eot,) = sent(
        c.on_event(final(" Hello", words((" Hello", 0.1, 0.5)), reason="finalize"), RECEIVED)
    )
    assert eot["end_of_turn_confidence"] == 1.0 and eot["transcript"] == "Hello"


# -- client messages -----------------------------------------------------------------------


def test_client_messages() -> None:
    c = codec()
    assert c.on_text('{"type": "ForceEndpoint"}', ALLOW) == []  # no audio yet: nothing to end
    assert c.on_text('{"type": "KeepAlive"}', ALLOW) == []
    assert c.on_binary(b"") == []
    assert c.on_binary(b"\x01\x00" * 800) == [FeedAudio(b"\x01\x00" * 800)]
    assert c.on_text('{"type": "Terminate"}', ALLOW) == [Stop()]
    assert c.on_binary(b"\x01\x00" * 800) == []  # after Terminate nothing is read
    assert c.on_text('{"type": "ForceEndpoint"}', ALLOW) == []


def test_update_configuration() -> None:
    c = codec("speech_model=universal-3-6-pro&keyterms_prompt=%5B%22old%22%5D")
    assert c.stream_setup().session.keyterms == ("old",)
    update = {
        "type": "UpdateConfiguration",
        "keyterms_prompt": ["Kettle", " kettle", "AAI"],
        "max_turn_silence": 2000,
        "min_turn_silence": 400,
        "prompt": "ignored",
    }
    # The endpoint the silences give (1040 ms) goes to the open stream, or to its setup.
    assert c.on_text(json.dumps(update), ALLOW) == [
        Reconfigure(keyterms=("Kettle", "AAI"), endpoint_silence_ms=1040)
    ]
    setup = c.stream_setup().session
    assert setup.keyterms == ("Kettle", "AAI")
    assert setup.endpoint_silence_ms == round(400 + 0.4 * 1600)
    # Silences alone change no keyterms; nothing changed, nothing to do.
    threshold = '{"type": "UpdateConfiguration", "end_of_turn_confidence_threshold": 0}'
    assert c.on_text(threshold, ALLOW) == [Reconfigure(endpoint_silence_ms=400)]
    assert c.stream_setup().session.endpoint_silence_ms == 400
    assert c.on_text(threshold, ALLOW) == []
    assert c.on_text('{"type": "UpdateConfiguration", "prompt": "x"}', ALLOW) == []
    # Over the rate, an update is dropped.
    assert (
        c.on_text('{"type": "UpdateConfiguration", "keyterms_prompt": ["x"]}', Gate("drop")) == []
    )
    assert c.stream_setup().session.keyterms == ("Kettle", "AAI")


def error_close(actions: Sequence[Action]) -> tuple[int | None, dict[str, Any]]:
    (action,) = actions
    assert isinstance(action, Send) and action.message.closing
    obj = json.loads(action.message.text)
    assert set(obj) == {"type", "error_code", "error"} and obj["type"] == "Error"
    assert obj["error_code"] == action.message.close_code
    return action.message.close_code, obj


def client_error_close(
    c: AssemblyAICodec, actions: Sequence[Action]
) -> tuple[int | None, dict[str, Any]]:
    """A client message that ends the session: the stream stops (its turns still come),
    and the Error and the close come at its end."""
    assert actions == [Stop(assemblyai.CLIENT_ERROR)]
    return error_close(c.on_event(Done(0, 0, reason=assemblyai.CLIENT_ERROR), RECEIVED))


def test_the_turns_before_an_invalid_message_still_come_then_its_error() -> None:
    c = codec()
    for _ in range(4):
        c.on_binary(b"\x00\x00" * (SR // 2))
    assert c.on_text("not json", ALLOW) == [Stop(assemblyai.CLIENT_ERROR)]
    assert c.on_binary(b"\x00\x00") == [] and c.on_text('{"type": "Terminate"}', ALLOW) == []
    (turn,) = sent(c.on_event(final(reason="stop"), RECEIVED))
    assert turn["type"] == "Turn" and turn["end_of_turn"] and turn["transcript"] == "hello world"
    code, obj = error_close(c.on_event(Done(2 * SR, 1, reason=assemblyai.CLIENT_ERROR), RECEIVED))
    assert code == 3006 and obj["error"].startswith("Invalid JSON")


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("not json", "Invalid JSON: "),
        ("[]", "Invalid Message: "),
        ('{"kind": "x"}', "Invalid Message: "),
        ('{"type": "Finalize"}', "Invalid Message Type: Finalize"),
        ('{"type": "UpdateConfiguration", "max_turn_silence": "soon"}', "Invalid Message: "),
        ('{"type": "UpdateConfiguration", "keyterms_prompt": [1, 2]}', "Invalid Message: "),
        (
            '{"type": "UpdateConfiguration", "end_of_turn_confidence_threshold": true}',
            "Invalid Message: ",
        ),
    ],
)
def test_invalid_messages_close_with_3006(text: str, start: str) -> None:
    c = codec()
    code, obj = client_error_close(c, c.on_text(text, ALLOW))
    assert code == 3006 and obj["error"].startswith(start)
    assert c.on_text('{"type": "KeepAlive"}', ALLOW) == []  # closed: nothing more is read


def test_oversized_audio_closes_with_3007() -> None:
    c = codec("sample_rate=8000")
    code, obj = client_error_close(c, c.on_binary(b"\x00" * 16002))  # 1000.125 ms
    assert code == 3007 and obj["error"].startswith("Input duration violation")
    assert codec("sample_rate=8000").on_binary(b"\x00" * 16000) == [FeedAudio(b"\x00" * 16000)]


def test_ending_errors() -> None:
    c = codec()
    code, obj = error_close(c.on_event(Done(SR, 1, reason="max_duration"), RECEIVED))
    assert code == 3008 and obj["error"].startswith("Session Expired")
    c = codec()
    assert c.on_event(Error("audio_backlog", "12.0 s of audio not transcribed"), RECEIVED) == []
    sent(c.on_event(final(), RECEIVED))  # the turns still come
    code, obj = error_close(c.on_event(Done(SR, 1, reason="audio_backlog"), RECEIVED))
    assert code == 3007 and "Audio Transmission Rate Exceeded" in obj["error"]
    c = codec()
    assert c.on_event(Error("overloaded", "partials skipped"), RECEIVED) == []
    code, obj = error_close(c.on_event(Error("internal", "boom", fatal=True), RECEIVED))
    assert code == 3005 and obj["error"] == "Session Cancelled: boom"
    assert json.loads(c.fatal_error("x")) == {"type": "Error", "error_code": 3005, "error": "x"}
    # Idle, shutdown: the turns, then Termination (the runner picks 1000 or 1001).
    (idle,) = codec().on_event(Done(0, 0, reason="idle"), RECEIVED)
    assert isinstance(idle, Send) and json.loads(idle.message.text)["type"] == "Termination"


def test_stream_setup() -> None:
    c = codec(
        "encoding=pcm_mulaw&sample_rate=8000&max_turn_silence=700&end_of_turn_confidence_threshold=1"
    )
    setup = c.stream_setup()
    assert (setup.audio.encoding, setup.audio.sample_rate) == ("mulaw", 8000)
    assert setup.session.endpoint_silence_ms == 700 and setup.session.word_timestamps
    assert setup.session.vad_events and setup.session.partials
    assert isinstance(c.params, StreamParams)


# -- streaming diarization (speaker_labels) -------------------------------------------------


def test_speaker_labels_letter_every_turn_and_final_word() -> None:
    p = parse_query("speaker_labels=true&max_speakers=3", multilingual=False)
    assert (p.session_config().diarize, p.session_config().max_speakers) == (True, 3)
    c = codec("speaker_labels=true&format_turns=true")
    (open_turn,) = sent(c.on_event(Partial(0, 0, 2 * SR, " Hello,", " Hello,"), RECEIVED))
    assert open_turn["speaker_label"] is None  # decided with the turn's final
    labeled = Final(0, 0, 2 * SR, " Hello, world.", HELLO, "en", reason="endpoint", speaker=1)
    plain, formatted = sent(c.on_event(labeled, RECEIVED))
    for turn in (plain, formatted):
        assert turn["speaker_label"] == "B"
        assert [w["speaker"] for w in turn["words"]] == ["B", "B"]


def test_without_speaker_labels_no_speaker_fields() -> None:
    c = codec()
    labeled = Final(0, 0, 2 * SR, " Hello, world.", HELLO, "en", reason="endpoint", speaker=0)
    (turn,) = sent(c.on_event(labeled, RECEIVED))
    assert "speaker_label" not in turn and all("speaker" not in w for w in turn["words"])


def test_speaker_labels_need_a_speaker_model_and_a_sane_cap() -> None:
    with pytest.raises(ParamError, match="speaker model"):
        parse_query("speaker_labels=true", multilingual=False, speakers=False)
    with pytest.raises(ParamError, match="max_speakers"):
        parse_query("speaker_labels=true&max_speakers=0", multilingual=False)
    assert not parse_query(
        "speaker_labels=false", multilingual=False, speakers=False
    ).speaker_labels
