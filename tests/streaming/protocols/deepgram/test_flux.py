"""The Deepgram Flux codec on scripted events: Flux's turn state rules, the end-of-turn
confidence, Configure, errors and the handshake's parameters. Every message is validated
strictly by the deepgram SDK's own Flux (listen v2) models."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kettle.streaming.core.events import (
    Done,
    Error,
    Final,
    Finalized,
    NoTranscript,
    Partial,
    Paused,
    Resumed,
    SpeechStarted,
    SpeechStopped,
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
from kettle.streaming.protocols.deepgram import flux_eot as eot
from kettle.streaming.protocols.deepgram.flux import CLIENT_ERROR, ROUTE, DeepgramFluxCodec
from kettle.streaming.protocols.deepgram.flux_wire import parse_flux_query
from kettle.streaming.protocols.handshake import HandshakeRefused, HandshakeRequest
from kettle.transcribe.types import SAMPLE_RATE, Word

from tests.streaming.protocols.api_models import FLUX_MODELS, Gate

SR = SAMPLE_RATE
SESSION = "0123456789abcdef0123456789abcdef"
MODELS = FLUX_MODELS
BASE = "model=flux-general-en&encoding=linear16&sample_rate=16000"


ALLOW = Gate()


class Flux:
    """A codec driven by a script: audio (silence: only the clock matters) and events."""

    def __init__(self, query: str = "") -> None:
        context = CodecContext(SESSION, ModelInfo("tiny.en", False), Limits(1 << 20, 20.0))
        params = parse_flux_query(f"{BASE}&{query}", multilingual=False, model_name="tiny.en")
        self.codec = DeepgramFluxCodec(context, params)
        self.sent: list[dict[str, Any]] = []
        self.actions: list[Action] = []
        self.take(self.codec.start())

    def take(self, actions: list[Action]) -> list[Action]:
        for action in actions:
            self.actions.append(action)
            if isinstance(action, Send) and action.message.text:
                obj = json.loads(action.message.text)
                MODELS[obj["type"]].model_validate(obj)
                self.sent.append(obj)
        return actions

    def audio(self, seconds: float, *, step: float = 0.02) -> list[Action]:
        """``seconds`` of audio in 20 ms frames; the actions they gave."""
        out: list[Action] = []
        for _ in range(round(seconds / step)):
            out += self.take(self.codec.on_binary(b"\0\0" * round(step * SR)))
        return out

    def event(self, *events: Any) -> list[Action]:
        out: list[Action] = []
        for e in events:
            out += self.take(self.codec.on_event(e, AudioReceived()))
        return out

    def text(self, obj: Any) -> list[Action]:
        raw = obj if isinstance(obj, str) else json.dumps(obj)
        return self.take(self.codec.on_text(raw, ALLOW))

    def turn_events(self) -> list[str]:
        return [m["event"] for m in self.sent if m["type"] == "TurnInfo" and m["event"] != "Update"]

    def last(self, event: str) -> dict[str, Any]:
        return [m for m in self.sent if m.get("event") == event][-1]

    @property
    def now(self) -> int:
        return self.codec.position


def words(text: str, start_s: float, end_s: float) -> tuple[Word, ...]:
    tokens = text.split()
    step = (end_s - start_s) / max(len(tokens), 1)
    return tuple(
        Word(" " + t, start_s + i * step, start_s + (i + 1) * step, 0.9)
        for i, t in enumerate(tokens)
    )


def final(start: int, end: int, text: str, reason: str = "finalize", n: int = 0) -> Final:
    return Final(n, start, end, text, words(text, start / SR, end / SR), "en", reason=reason)


def speak(flux: Flux, text: str, seconds: float = 1.0) -> int:
    """An utterance starts now, is spoken for ``seconds`` with a partial, then pauses: the
    pause's speech end (samples)."""
    start = flux.now
    flux.event(SpeechStarted(start))
    flux.audio(seconds)
    flux.event(Partial(0, start, flux.now, text, ""))
    speech_end = flux.now
    flux.audio(0.2)
    flux.event(Paused(start, speech_end, flux.now))
    return start


def resolve_at_finalize(flux: Flux, start: int, text: str, *, upto: float = 3.0) -> None:
    """Audio until the codec finalizes (within ``upto`` s), then the utterance's final."""
    for _ in range(round(upto / 0.02)):
        if any(isinstance(a, Finalize) for a in flux.audio(0.02)):
            flux.event(Finalized(flux.now), final(start, flux.now, text))
            return
    pytest.fail("no Finalize came")


# -- the turn's messages -------------------------------------------------------------------------


def test_connected_first_with_request_id_and_sequence() -> None:
    flux = Flux()
    first = flux.sent[0]
    assert first["type"] == "Connected" and first["sequence_id"] == 0
    assert first["request_id"] == "01234567-89ab-cdef-0123-456789abcdef"
    assert first["model_info"]["name"] == "tiny.en"


def test_a_turn_starts_at_its_first_text_and_ends_on_confidence() -> None:
    flux = Flux()
    start = speak(flux, "so my fellow")
    assert flux.turn_events() == ["StartOfTurn"]
    assert flux.last("StartOfTurn")["transcript"] == "so my fellow"
    assert flux.last("StartOfTurn")["end_of_turn_confidence"] == eot.SPEAKING
    resolve_at_finalize(flux, start, "So my fellow Americans")
    end = flux.last("EndOfTurn")
    assert flux.turn_events() == ["StartOfTurn", "EndOfTurn"]
    assert end["transcript"] == "So my fellow Americans" and end["trigger"] == "model"
    assert end["end_of_turn_confidence"] >= 0.7 and end["turn_index"] == 0
    assert [w["word"] for w in end["words"]] == ["So", "my", "fellow", "Americans"]
    assert all(w["confidence"] == 0.9 for w in end["words"])
    # No cue: the default threshold 0.7 is crossed after 800 ms of silence.
    assert flux.codec.stats.turns == 1 and flux.codec.stats.ends == {"model": 1}


def test_the_end_comes_sooner_when_the_text_ends_a_sentence() -> None:
    def silence_at_end(text: str) -> float:
        flux = Flux()
        speak(flux, text)
        paused_at = flux.now - round(0.2 * SR)
        for _ in range(200):
            if any(isinstance(a, Finalize) for a in flux.audio(0.02)):
                return (flux.now - paused_at) / SR
        raise AssertionError("no end")

    assert silence_at_end("ask not what") == pytest.approx(0.8, abs=0.03)
    assert silence_at_end("ask not what your country can do for you.") == pytest.approx(
        0.48, abs=0.03
    )


def test_turn_index_increments_per_turn_and_sequence_ids_count_every_message() -> None:
    flux = Flux()
    for n in range(3):
        start = speak(flux, f"turn {n}")
        resolve_at_finalize(flux, start, f"Turn {n}.")
        flux.audio(0.5)
    ends = [m for m in flux.sent if m.get("event") == "EndOfTurn"]
    assert [m["turn_index"] for m in ends] == [0, 1, 2]
    starts = [m for m in flux.sent if m.get("event") == "StartOfTurn"]
    assert [m["turn_index"] for m in starts] == [0, 1, 2]
    assert [m["sequence_id"] for m in flux.sent] == list(range(len(flux.sent)))


def test_updates_come_every_quarter_second_of_a_spoken_turn() -> None:
    flux = Flux()
    flux.event(SpeechStarted(0))
    flux.audio(0.5)
    flux.event(Partial(0, 0, flux.now, "ask not", ""))
    flux.audio(1.1)  # (in 20 ms frames: an Update at the first frame past each 0.25 s)
    updates = [m for m in flux.sent if m.get("event") == "Update"]
    assert len(updates) == 4
    assert all(u["transcript"] == "ask not" for u in updates)
    assert updates[-1]["audio_window_end"] == 0.5  # the audio the text covers


def test_eager_end_then_the_same_transcript_at_the_end() -> None:
    flux = Flux("eager_eot_threshold=0.4&eot_threshold=0.8")
    start = speak(flux, "ask not what your country can do for you")
    spec = "Ask not what your country can do for you."
    flux.event(Partial(0, start, flux.now, spec, "", speculative=True))
    assert flux.turn_events()[-1] == "EagerEndOfTurn"
    eager = flux.last("EagerEndOfTurn")
    assert eager["transcript"] == spec and eager["end_of_turn_confidence"] >= 0.4
    # The final reads the same words in another case: the eager transcript stands.
    resolve_at_finalize(flux, start, "ask not what your country can do for you")
    assert flux.turn_events() == ["StartOfTurn", "EagerEndOfTurn", "EndOfTurn"]
    assert flux.last("EndOfTurn")["transcript"] == spec
    assert flux.codec.stats.eager == 1 and flux.codec.stats.resumed == 0


def test_eager_transcript_never_empty_and_needs_the_speculative_final() -> None:
    flux = Flux("eager_eot_threshold=0.3")
    start = speak(flux, "ask not what")
    flux.audio(0.5)  # confidence past 0.3, but no speculative text yet
    assert "EagerEndOfTurn" not in flux.turn_events()
    flux.event(Partial(0, start, flux.now, "ask not what", "", speculative=True))
    assert flux.turn_events()[-1] == "EagerEndOfTurn"
    assert all(m["transcript"] for m in flux.sent if m.get("event") == "EagerEndOfTurn")


def test_turn_resumed_when_speech_comes_back_after_an_eager_end() -> None:
    flux = Flux("eager_eot_threshold=0.3&eot_threshold=0.9")
    start = speak(flux, "ask not")
    flux.event(Partial(0, start, flux.now, "Ask not", "", speculative=True))
    assert flux.turn_events()[-1] == "EagerEndOfTurn"
    flux.event(Resumed(start, flux.now))
    assert flux.turn_events()[-1] == "TurnResumed"
    flux.audio(0.6)
    flux.event(Partial(0, start, flux.now, "Ask not what your country", ""))
    assert flux.last("Update")["transcript"] == "Ask not what your country"
    speech_end = flux.now
    flux.audio(0.2)
    flux.event(Paused(start, speech_end, flux.now))
    resolve_at_finalize(flux, start, "Ask not what your country")
    assert flux.turn_events() == ["StartOfTurn", "EagerEndOfTurn", "TurnResumed", "EndOfTurn"]
    assert flux.last("EndOfTurn")["transcript"] == "Ask not what your country"
    stats = flux.codec.stats
    assert stats.eager == 1 and stats.resumed_by_speech == 1 and stats.resumed_by_revision == 0


def test_turn_resumed_only_follows_an_eager_end() -> None:
    flux = Flux("eager_eot_threshold=0.9&eot_threshold=0.9")
    start = speak(flux, "ask not")
    flux.event(Resumed(start, flux.now))
    flux.audio(0.5)
    flux.event(Partial(0, start, flux.now, "ask not what", ""))
    assert "TurnResumed" not in flux.turn_events()


def test_a_final_with_other_words_than_the_eager_one_resumes_first() -> None:
    flux = Flux("eager_eot_threshold=0.3")
    start = speak(flux, "ask not what")
    flux.event(Partial(0, start, flux.now, "Ask not what.", "", speculative=True))
    resolve_at_finalize(flux, start, "Ask not, Watt.")
    assert flux.turn_events() == ["StartOfTurn", "EagerEndOfTurn", "TurnResumed", "EndOfTurn"]
    assert flux.last("EndOfTurn")["transcript"] == "Ask not, Watt."
    assert flux.codec.stats.resumed_by_revision == 1


def test_the_timeout_ends_a_turn_no_confidence_ends() -> None:
    flux = Flux("eot_threshold=1.0&eot_timeout_ms=1500")
    start = speak(flux, "one two three.")
    flux.audio(1.2)
    assert "EndOfTurn" not in flux.turn_events()
    resolve_at_finalize(flux, start, "One, two, three.")
    assert flux.last("EndOfTurn")["trigger"] == "timeout"


def test_a_turn_outlives_a_vad_endpoint_before_its_end() -> None:
    flux = Flux("eot_threshold=1.0&eot_timeout_ms=20000")
    first = speak(flux, "one")
    flux.audio(0.5)
    flux.event(
        SpeechStopped(first, flux.now, "endpoint"), final(first, flux.now, "One,", "endpoint")
    )
    assert "EndOfTurn" not in flux.turn_events()
    second = speak(flux, "two")
    flux.event(final(second, flux.now, "two.", "endpoint"))
    flux.text({"type": "ForceEndTurn"})
    assert flux.last("EndOfTurn")["transcript"] == "One, two."
    assert flux.last("EndOfTurn")["trigger"] == "manual"
    assert flux.turn_events() == ["StartOfTurn", "EndOfTurn"]


def test_after_an_utterance_cut_mid_speech_the_silence_counts_from_its_end() -> None:
    flux = Flux()
    flux.event(SpeechStarted(0))
    flux.audio(1.0)
    flux.event(Partial(0, 0, flux.now, "a long one", ""))
    flux.event(
        SpeechStopped(0, flux.now, "max_length"), final(0, flux.now, "A long one", "max_length")
    )
    assert "EndOfTurn" not in flux.turn_events()
    flux.audio(1.0)  # nothing more was said
    assert flux.last("EndOfTurn")["transcript"] == "A long one"


def test_force_end_turn_finalizes_and_ends_manually() -> None:
    flux = Flux()
    flux.event(SpeechStarted(0))
    flux.audio(0.6)
    flux.event(Partial(0, 0, flux.now, "push to", ""))
    assert isinstance(flux.text({"type": "ForceEndTurn"})[-1], Finalize)
    flux.event(final(0, flux.now, "Push to talk."))
    end = flux.last("EndOfTurn")
    assert end["trigger"] == "manual" and end["transcript"] == "Push to talk."


def test_a_later_utterance_waits_for_the_turn_that_ends() -> None:
    flux = Flux()
    first = speak(flux, "one")
    for _ in range(100):
        if any(isinstance(a, Finalize) for a in flux.audio(0.02)):
            break
    # The next utterance's events come before the first one's final.
    second = flux.now
    flux.event(SpeechStarted(second))
    flux.audio(0.5)
    flux.event(Partial(1, second, flux.now, "two", ""))
    assert flux.turn_events() == ["StartOfTurn"]
    flux.event(final(first, second, "One."))
    assert flux.turn_events() == ["StartOfTurn", "EndOfTurn", "StartOfTurn"]
    assert flux.last("StartOfTurn")["turn_index"] == 1
    assert flux.last("StartOfTurn")["transcript"] == "two"


def test_no_transcript_ends_a_started_turn_with_what_it_had() -> None:
    flux = Flux()
    start = speak(flux, "hmm")
    for _ in range(100):
        if any(isinstance(a, Finalize) for a in flux.audio(0.02)):
            break
    flux.event(NoTranscript(start))
    assert flux.turn_events() == ["StartOfTurn", "EndOfTurn"]
    assert flux.last("EndOfTurn")["transcript"] == ""


def test_close_stream_ends_the_open_turn_then_closes_normally() -> None:
    flux = Flux()
    flux.event(SpeechStarted(0))
    flux.audio(0.6)
    flux.event(Partial(0, 0, flux.now, "ask not", ""))
    assert flux.text({"type": "CloseStream"}) == [Stop()]
    assert flux.text({"type": "ForceEndTurn"}) == []  # nothing after CloseStream
    flux.event(final(0, flux.now, "Ask not.", "stop"))
    actions = flux.event(Done(flux.now, 1))
    assert flux.turn_events() == ["StartOfTurn", "EndOfTurn"]
    assert flux.last("EndOfTurn")["trigger"] == "close"
    closing = actions[-1]
    assert isinstance(closing, Send) and closing.message.closing and not closing.message.fatal
    assert closing.message.text == ""  # Flux says nothing more: close 1000


def test_an_idle_stream_closes_with_1011() -> None:
    flux = Flux()
    closing = flux.event(Done(0, 0, reason="idle"))[-1]
    assert isinstance(closing, Send) and closing.message.closing and closing.message.fatal


def test_vad_events_only_of_text_start_turns() -> None:
    flux = Flux()
    flux.event(SpeechStarted(0))
    flux.audio(2.0)
    flux.event(NoTranscript(0))
    assert flux.turn_events() == []


# -- confidence ----------------------------------------------------------------------------------


def test_confidence_grows_with_silence_and_cues() -> None:
    assert eot.confidence(0, closing=False, agrees=False) == eot.PRIOR
    assert eot.confidence(eot.HORIZON_MS, closing=False, agrees=False) == 1.0
    assert (
        eot.confidence(600, closing=True, agrees=True)
        > eot.confidence(600, closing=True, agrees=False)
        > eot.confidence(600, closing=False, agrees=False)
    )
    assert eot.ends_sentence("Done.") and eot.ends_sentence('He said "go!"')
    assert not eot.ends_sentence("and then...") and not eot.ends_sentence("so,")
    assert eot.same_words("Ask not, what?", "ask not what")
    assert eot.endpoint_silence_ms(5000) == 5000 and eot.endpoint_silence_ms(60000) == 10000


def test_stream_setup_maps_the_timeout_to_the_vad_endpoint_and_keyterms() -> None:
    flux = Flux("eot_timeout_ms=3000&keyterm=Kettle&keyterm=Flux&keyterm=kettle")
    config = flux.codec.stream_setup().session
    assert config.endpoint_silence_ms == 3000
    assert config.keyterms == ("Kettle", "Flux")
    assert config.partials and config.vad_events and config.pause_events


# -- client messages -----------------------------------------------------------------------------


def test_configure_changes_thresholds_and_keyterms() -> None:
    flux = Flux()
    actions = flux.text(
        {
            "type": "Configure",
            "thresholds": {"eot_threshold": 0.8, "eager_eot_threshold": 0.4},
            "keyterms": ["Kettle", " Flux "],
        }
    )
    assert Reconfigure(keyterms=("Kettle", "Flux")) in actions
    ok = flux.sent[-1]
    assert ok["type"] == "ConfigureSuccess"
    assert ok["thresholds"] == {
        "eot_threshold": 0.8,
        "eager_eot_threshold": 0.4,
        "eot_timeout_ms": 5000,
    }
    assert ok["keyterms"] == ["Kettle", "Flux"]
    assert flux.codec.stream_setup().session.keyterms == ("Kettle", "Flux")


@pytest.mark.parametrize(
    "message",
    [
        {"type": "Configure", "thresholds": {"eager_eot_threshold": 0.8}},  # above eot 0.7
        {"type": "Configure", "thresholds": {"eot_threshold": 0.2}},
        {"type": "Configure", "thresholds": {"eot_timeout_ms": "soon"}},
        {"type": "Configure", "thresholds": [0.5]},
        {"type": "Configure", "keyterms": "Kettle"},
        {"type": "Configure", "language_hints": ["de"]},
    ],
)
def test_configure_failure_changes_nothing(message: dict[str, Any]) -> None:
    flux = Flux()
    actions = flux.text(message)
    assert not any(isinstance(a, Reconfigure) for a in actions)
    assert flux.sent[-1]["type"] == "ConfigureFailure" and flux.sent[-1]["description"]
    assert flux.codec.thresholds == flux.codec.params.thresholds


def test_unknown_messages_get_a_warning_and_non_json_a_fatal_error() -> None:
    flux = Flux()
    flux.text({"type": "Finalize"})
    assert flux.sent[-1]["type"] == "Warning" and flux.sent[-1]["code"] == "UNKNOWN_MESSAGE_TYPE"
    # A turn is open: it still ends (its final comes, the stream stopped) before the Error.
    start = flux.now
    flux.event(SpeechStarted(start))
    flux.audio(0.5)
    flux.event(Partial(0, start, flux.now, "ask not", ""))
    assert flux.text("not json") == [Stop(CLIENT_ERROR)]
    assert flux.codec.on_binary(b"\0\0") == []  # nothing after a fatal error
    assert flux.text({"type": "CloseStream"}) == []
    flux.event(final(start, flux.now, "Ask not.", "stop"))
    actions = flux.event(Done(flux.now, 1, reason=CLIENT_ERROR))
    end, error = flux.sent[-2:]
    assert end["event"] == "EndOfTurn" and end["transcript"] == "Ask not."
    assert error["type"] == "Error" and error["code"] == "UNPARSABLE_CLIENT_MESSAGE"
    send = actions[-1]
    assert isinstance(send, Send) and send.message.closing and send.message.fatal


def test_rate_limited_messages_are_warned_once_then_dropped() -> None:
    flux = Flux()
    assert flux.codec.on_text('{"type": "Configure"}', Gate("drop")) == []
    flux.take(flux.codec.on_text('{"type": "Configure"}', Gate("notify")))
    assert flux.sent[-1]["code"] == "RATE_LIMITED"
    assert flux.codec.on_text('{"type": "CloseStream"}', Gate("drop")) == [Stop()]


def test_audio_over_the_limit_and_leftovers_are_warned() -> None:
    flux = Flux()
    assert flux.text({"type": "KeepAlive"}) == []
    flux.take(flux.codec.on_binary(b"\0" * ((1 << 20) + 2)))
    assert flux.sent[-1]["code"] == "AUDIO_TOO_LARGE"
    assert isinstance(flux.codec.on_binary(b"\0\0")[0], FeedAudio)
    flux.take(flux.codec.on_leftover(1, 2))
    assert flux.sent[-1]["code"] == "PARTIAL_SAMPLE"


def test_engine_errors() -> None:
    flux = Flux()
    flux.event(Error("overloaded", "busy"))
    assert flux.sent[-1]["type"] == "Warning" and flux.sent[-1]["code"] == "OVERLOADED"
    actions = flux.event(Error("internal", "boom", fatal=True))
    assert flux.sent[-1] == {
        "type": "Error",
        "sequence_id": 2,
        "code": "INTERNAL_SERVER_ERROR",
        "description": "boom",
    }
    assert isinstance(actions[-1], Send) and actions[-1].message.fatal
    assert json.loads(flux.codec.fatal_error("crash"))["code"] == "INTERNAL_SERVER_ERROR"


# -- the handshake -------------------------------------------------------------------------------


def request(query: str, headers: dict[str, str] | None = None) -> HandshakeRequest:
    return HandshakeRequest("/v2/listen", query, headers or {"authorization": "Token k"})


def test_handshake_defaults_and_credentials() -> None:
    # No encoding: linear16 at 16 kHz (kettle's Flux takes no containers).
    prepared = ROUTE.prepare(request("model=flux-general-en"), ModelInfo("tiny.en", False))
    codec = prepared.make_codec(CodecContext(SESSION, ModelInfo("tiny.en", False)))
    assert isinstance(codec, DeepgramFluxCodec)
    th = codec.thresholds
    assert (th.eot_threshold, th.eager_eot_threshold, th.eot_timeout_ms) == (0.7, None, 5000)
    assert codec.stream_setup().audio.sample_rate == 16000
    assert ROUTE.path == "/v2/listen"
    assert ROUTE.credentials(request("")) == ("k",)
    assert ROUTE.credentials(HandshakeRequest("/v2/listen", "", {}, ("token", "k2"))) == ("k2",)
    # Flux's other documented parameters are accepted.
    ROUTE.prepare(
        request(f"{BASE}&mip_opt_out=true&tag=a&tag=b&numerals=true&language_hint=en"), None
    )


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("eot_threshold=0.4", "eot_threshold"),
        ("eot_threshold=high", "eot_threshold"),
        ("eager_eot_threshold=0.95", "eager_eot_threshold"),
        ("eager_eot_threshold=0.8&eot_threshold=0.6", "eager_eot_threshold"),
        ("eot_timeout_ms=100", "eot_timeout_ms"),
        ("eot_timeout_ms=1.5", "eot_timeout_ms"),
        ("encoding=opus", "encoding"),
        ("sample_rate=abc", "sample_rate"),
        ("mip_opt_out=maybe", "mip_opt_out"),
        ("model=nova-3", "model"),
        # A raw encoding named without its rate, as on /v1/listen (Deepgram requires both).
        ("model=flux-general-en&encoding=mulaw", "sample_rate is required with encoding=mulaw"),
        ("model=flux-general-en&encoding=ogg-opus&sample_rate=48000", "not containers"),
        ("model=flux-general-multi", "English-only"),
        ("redact=numbers", "redact"),
        ("profanity_filter=true", "profanity_filter"),
    ],
)
def test_bad_parameters_are_refused_with_400_in_deepgram_shape(query: str, names: str) -> None:
    full = query if query.startswith("model=") else f"{BASE}&{query}"
    with pytest.raises(HandshakeRefused) as info:
        ROUTE.prepare(request(full), ModelInfo("tiny.en", False))
    assert info.value.status == 400 and names in info.value.message
    assert ROUTE.refusal is not None
    body, content_type = ROUTE.refusal(400, info.value.message)
    assert content_type == "application/json"
    assert json.loads(body) == {"err_code": "Bad Request", "err_msg": info.value.message}
