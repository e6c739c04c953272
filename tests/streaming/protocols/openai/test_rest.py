"""OpenAI REST request parsing and response rendering (pure; the SDK tests drive the routes)."""

from __future__ import annotations

import json
import math

import pytest
from kettle.streaming.protocols.openai import rest
from kettle.streaming.protocols.openai import rest_render as out
from kettle.transcribe.transcript import DecodeStats, Segment, Transcript
from kettle.transcribe.types import Word

CATALOG = rest.ModelCatalog(
    (rest.ModelEntry("tiny.en", multilingual=False), rest.ModelEntry("base", multilingual=True))
)
AUDIO = b"RIFF....WAVEfmt "


def parse(fields: list[tuple[str, str]], task: str = "transcribe") -> rest.AudioRequest:
    return rest.parse_audio_form(fields, AUDIO, task=task, catalog=CATALOG)


def test_defaults_and_alias() -> None:
    req = parse([("model", "whisper-1")])
    assert req.model.id == "tiny.en"  # the alias names the default (first) model
    assert (req.response_format, req.language, req.words, req.stream) == (
        "json",
        None,
        False,
        False,
    )


def test_every_field_parsed() -> None:
    req = parse(
        [
            ("model", "base"),
            ("language", "DE"),
            ("prompt", "  Kettle, Whisper  "),
            ("temperature", "0.2"),
            ("response_format", "verbose_json"),
            ("timestamp_granularities[]", "word"),
            ("timestamp_granularities[]", "segment"),
            ("chunking_strategy", "auto"),
            ("speaker_style[]", "agent"),  # unknown fields are ignored
        ]
    )
    assert (req.model.id, req.language, req.prompt, req.temperature) == (
        "base",
        "de",
        "Kettle, Whisper",
        0.2,
    )
    assert req.words and req.response_format == "verbose_json"


def test_granularities_without_brackets() -> None:
    req = parse(
        [
            ("model", "base"),
            ("response_format", "verbose_json"),
            ("timestamp_granularities", "word"),
        ]
    )
    assert req.words


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ([("model", "base"), ("response_format", "xml")], "response_format"),
        ([("model", "base"), ("language", "english")], "language"),
        ([("model", "tiny.en"), ("language", "de")], "language"),
        ([("model", "base"), ("temperature", "2")], "temperature"),
        ([("model", "base"), ("temperature", "warm")], "temperature"),
        ([("model", "base"), ("stream", "maybe")], "stream"),
        ([("model", "base"), ("stream", "true"), ("response_format", "srt")], "stream"),
        ([("model", "base"), ("timestamp_granularities[]", "word")], "timestamp_granularities"),
        (
            [("model", "base"), ("response_format", "verbose_json"),
             ("timestamp_granularities[]", "char")],
            "timestamp_granularities",
        ),
        ([], "model"),
    ],
)  # fmt: skip
def test_bad_parameters_are_400_naming_the_param(fields: list[tuple[str, str]], param: str) -> None:
    with pytest.raises(rest.OpenAIError) as info:
        parse(fields)
    err = info.value
    assert err.status == 400 and err.param == param
    body = err.body()["error"]
    assert set(body) == {"message", "type", "param", "code"} and body["message"]


def test_missing_or_empty_file_is_400() -> None:
    for file in (None, b""):
        with pytest.raises(rest.OpenAIError) as info:
            rest.parse_audio_form([("model", "base")], file, task="transcribe", catalog=CATALOG)
        assert info.value.status == 400 and info.value.param == "file"


def test_unknown_model_is_404_and_english_only_cannot_translate() -> None:
    with pytest.raises(rest.OpenAIError) as info:
        parse([("model", "gpt-9")])
    assert (info.value.status, info.value.code) == (404, "model_not_found")
    with pytest.raises(rest.OpenAIError) as info:
        parse([("model", "tiny.en")], task="translate")
    assert info.value.status == 400 and info.value.param == "model"
    assert parse([("model", "base")], task="translate").task == "translate"


def test_busy_errors_carry_retry_after() -> None:
    for err, status in ((rest.busy(3), 429), (rest.busy(3, unavailable=True), 503)):
        assert err.status == status and err.headers == {"Retry-After": "3"}


def test_models_listing() -> None:
    ids = [m["id"] for m in CATALOG.list_body()["data"]]
    assert ids == ["tiny.en", "base", "whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe",
                   "gpt-4o-transcribe-diarize", "gpt-transcribe", "gpt-realtime-whisper",
                   "gpt-live-transcribe"]  # fmt: skip
    assert CATALOG.get_body("whisper-1")["object"] == "model"
    assert CATALOG.get_body("gpt-4o-transcribe-2025-03-20")["id"] == "gpt-4o-transcribe-2025-03-20"
    with pytest.raises(rest.OpenAIError):
        CATALOG.get_body("nope")


@pytest.mark.parametrize(
    "name",
    ["whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe", "gpt-transcribe",
     "gpt-4o-mini-transcribe-2025-03-20", "gpt-4o-transcribe-2025-12-15"],
)  # fmt: skip
def test_the_names_openai_clients_send_by_default_name_the_default_model(name: str) -> None:
    assert parse([("model", name)]).model.id == "tiny.en"


@pytest.mark.parametrize("name", ["gpt-5", "gpt-4o-diarize", "whisper-2", "-2025-01-01"])
def test_other_names_are_404_model_not_found(name: str) -> None:
    with pytest.raises(rest.OpenAIError) as info:
        parse([("model", name)])
    assert info.value.status == 404 and info.value.body()["error"]["code"] == "model_not_found"


def test_the_aliases_are_configurable() -> None:
    catalog = rest.ModelCatalog((rest.ModelEntry("tiny.en", multilingual=False),), ("house-stt",))
    assert [m["id"] for m in catalog.list_body()["data"]] == ["tiny.en", "house-stt"]
    assert catalog.resolve("house-stt-2026-01-01").id == "tiny.en"
    with pytest.raises(rest.OpenAIError):
        catalog.resolve("whisper-1")


TRANSCRIPT = Transcript(
    duration_s=4.2,
    language="en",
    model="tiny.en",
    segments=(
        Segment(
            0.5,
            1.5,
            "Hello there.",
            (Word(" Hello", 0.5, 0.9, 0.9), Word(" there.", 0.9, 1.5, 0.8)),
            DecodeStats((50, 51), 0.0, -0.25, 1.1, 0.01),
        ),
        Segment(2.0, 3.0, "Second one.", (Word(" Second", 2.0, 2.5, 0.7),)),
    ),
)


def render(fmt: str, words: bool = False, task: str = "transcribe") -> str:
    req = rest.AudioRequest(task, AUDIO, CATALOG.default, response_format=fmt, words=words)
    body, _ = out.render(TRANSCRIPT, req)
    return body


def test_json_and_text() -> None:
    assert json.loads(render("json")) == {
        "text": "Hello there. Second one.",
        "usage": {"type": "duration", "seconds": 5},
        "languages": [{"code": "en"}],
    }
    assert json.loads(render("json", task="translate")) == {"text": "Hello there. Second one."}
    assert render("text") == "Hello there. Second one.\n"


def test_srt_and_vtt_use_the_writers() -> None:
    assert render("srt").startswith("1\n00:00:00,500 --> 00:00:01,500\nHello there.\n")
    assert render("vtt").startswith("WEBVTT\n\n00:00:00.500 --> 00:00:01.500\nHello there.\n")


def test_verbose_json_has_faster_whisper_segment_fields() -> None:
    body = json.loads(render("verbose_json"))
    assert (body["task"], body["language"], body["duration"]) == ("transcribe", "english", 4.2)
    seg = body["segments"][0]
    assert seg == {
        "id": 0,
        "seek": 50,
        "start": 0.5,
        "end": 1.5,
        "text": "Hello there.",
        "tokens": [50, 51],
        "temperature": 0.0,
        "avg_logprob": -0.25,
        "compression_ratio": 1.1,
        "no_speech_prob": 0.01,
    }
    assert body["segments"][1]["tokens"] == [] and "words" not in body


def test_verbose_json_words_when_asked() -> None:
    body = json.loads(render("verbose_json", words=True))
    assert body["words"] == [
        {"word": "Hello", "start": 0.5, "end": 0.9},
        {"word": "there.", "start": 0.9, "end": 1.5},
        {"word": "Second", "start": 2.0, "end": 2.5},
    ]
    assert body["segments"][0]["words"][0] == {
        "word": " Hello",
        "start": 0.5,
        "end": 0.9,
        "probability": 0.9,
    }


def test_stream_events_deltas_add_up_to_done() -> None:
    frames = list(out.stream_events(TRANSCRIPT))
    assert all(f.startswith("data: ") and f.endswith("\n\n") for f in frames)
    events = [json.loads(f[len("data: ") :]) for f in frames]
    assert [e["type"] for e in events] == [
        "transcript.text.delta",
        "transcript.text.delta",
        "transcript.text.done",
    ]
    assert "".join(e["delta"] for e in events[:-1]) == events[-1]["text"] == TRANSCRIPT.text
    done = events[-1]
    assert done["languages"] == [{"code": "en"}] and "logprobs" not in done
    # The SDK types the done event's usage as tokens: 50 audio tokens a second, text tokens.
    assert done["usage"] == {
        "type": "tokens",
        "input_tokens": 210,
        "output_tokens": 3,
        "total_tokens": 213,
        "input_token_details": {"audio_tokens": 210, "text_tokens": 0},
    }


def test_logprobs_are_the_words_in_json_and_stream() -> None:
    req = parse([("model", "whisper-1"), ("include[]", "logprobs")])
    assert req.logprobs
    body = json.loads(out.render(TRANSCRIPT, req)[0])
    assert [p["token"] for p in body["logprobs"]] == [" Hello", " there.", " Second"]
    assert body["logprobs"][0] == {
        "token": " Hello",
        "logprob": round(math.log(0.9), 6),
        "bytes": list(b" Hello"),
    }
    events = [json.loads(f[6:]) for f in out.stream_events(TRANSCRIPT, req)]
    deltas = [p for e in events[:-1] for p in e["logprobs"]]
    assert deltas == events[-1]["logprobs"] == body["logprobs"]


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ([("include[]", "logprobs"), ("response_format", "text")], "include"),
        ([("include[]", "segments")], "include"),
        ([("keywords[]", "x" * 101)], "keywords"),
        ([("languages[]", "xx")], "languages"),
        ([("languages[]", "de")], "languages"),  # tiny.en is English-only
        ([("chunking_strategy", "manual")], "chunking_strategy"),
        ([("chunking_strategy[type]", "semantic_vad")], "chunking_strategy.type"),
        ([("chunking_strategy[type]", "server_vad"), ("chunking_strategy[threshold]", "2")],
         "chunking_strategy.threshold"),
        ([("chunking_strategy[type]", "server_vad"),
          ("chunking_strategy[silence_duration_ms]", "1.5")],
         "chunking_strategy.silence_duration_ms"),
        ([("chunking_strategy", '{"type": "server_vad", "eagerness": "low"}')],
         "chunking_strategy"),
    ],
)  # fmt: skip
def test_new_fields_refused_with_their_param(fields: list[tuple[str, str]], param: str) -> None:
    with pytest.raises(rest.OpenAIError) as info:
        parse([("model", "whisper-1"), *fields])
    assert info.value.status == 400 and info.value.param == param


def test_keywords_languages_and_chunking() -> None:
    req = parse(
        [
            ("model", "base"),
            ("keywords[]", " Kettle "),
            ("keywords[]", "kettle"),
            ("keywords[]", "CTranslate2"),
            ("languages[]", "DE"),
            ("languages[]", "fr"),
            ("chunking_strategy[type]", "server_vad"),
            ("chunking_strategy[threshold]", "1"),
            ("chunking_strategy[silence_duration_ms]", "300"),
            ("chunking_strategy[prefix_padding_ms]", "200"),
        ]
    )
    assert req.keyterms == ("Kettle", "CTranslate2")
    assert (req.language, req.languages) == (None, ("de", "fr"))
    assert req.windows is not None
    assert (req.windows.vad_threshold, req.windows.min_silence_ms) == (0.99, 300)
    assert req.windows.speech_pad_ms == 200
    one = parse([("model", "base"), ("languages[]", "de"), ("languages", "de")])
    assert (one.language, one.languages) == ("de", ())
    named = parse([("model", "base"), ("language", "fr"), ("languages[]", "de"),
                   ("languages[]", "en")])  # fmt: skip
    assert (named.language, named.languages) == ("fr", ())
    as_json = parse([("model", "base"), ("chunking_strategy", '{"type": "server_vad"}')])
    assert as_json.windows is None  # server_vad with kettle's own settings
    assert parse([("model", "base"), ("chunking_strategy", "auto")]).windows is None


def test_diarized_json_parses_with_known_speakers() -> None:
    url = "data:audio/wav;base64,UklGRg=="
    req = parse(
        [
            ("model", "gpt-4o-transcribe-diarize"),
            ("response_format", "diarized_json"),
            ("known_speaker_names[]", "agent"),
            ("known_speaker_references[]", url),
        ]
    )
    assert req.model.id == "tiny.en" and req.diarize
    assert req.known_speakers == (("agent", b"RIFF"),)
    assert not parse([("model", "gpt-4o-transcribe-diarize")]).diarize  # json: text only
    with pytest.raises(rest.OpenAIError) as info:
        parse([("model", "base"), ("response_format", "diarized_json")], task="translate")
    assert info.value.param == "response_format"


def test_diarized_json_body_and_stream_segments() -> None:
    req = parse([("model", "whisper-1"), ("response_format", "diarized_json"), ("stream", "true")])
    labels = ["A", "agent"]
    text, content_type = out.render(TRANSCRIPT, req, labels)
    body = json.loads(text)
    assert content_type == "application/json"
    assert (body["task"], body["text"], body["usage"]["type"]) == (
        "transcribe",
        TRANSCRIPT.text,
        "duration",
    )
    assert [(s["type"], s["id"], s["speaker"]) for s in body["segments"]] == [
        ("transcript.text.segment", "seg_0", "A"),
        ("transcript.text.segment", "seg_1", "agent"),
    ]
    assert set(body["segments"][0]) == {"type", "id", "start", "end", "text", "speaker"}
    events = [json.loads(f[len("data: ") :]) for f in out.stream_events(TRANSCRIPT, req, labels)]
    assert [e["type"] for e in events] == [
        "transcript.text.delta",
        "transcript.text.segment",
        "transcript.text.delta",
        "transcript.text.segment",
        "transcript.text.done",
    ]
    assert [e.get("segment_id") for e in events[::2][:2]] == ["seg_0", "seg_1"]
    assert events[1] == body["segments"][0]
