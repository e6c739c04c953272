"""Pieces: words fixed at an open utterance's pauses, so later decodes cover only what
follows (streaming/core/pieces.py), alone and through a session."""

from __future__ import annotations

from kettle.streaming.core.context import Context
from kettle.streaming.core.events import Final
from kettle.streaming.core.pieces import LEAD, MIN_PAUSE, Candidate, Piece, context, cut
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.core.vad import EnergyClassifier
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind

from tests.streaming.core.conftest import drive, window_key

SR = SAMPLE_RATE


def candidate(speech_end: int, heard_until: int) -> Candidate:
    return Candidate(0, speech_end, heard_until, "one two", ())


def test_a_piece_needs_a_pause_long_enough_and_a_window_that_heard_none_of_what_came_back() -> None:
    c = candidate(speech_end=SR, heard_until=SR + 960)
    assert cut(c, SR + MIN_PAUSE - 1) is None  # too short a pause to cut in
    assert cut(c, SR + 900) is None  # the window heard past where the speech came back
    # It ends before the words that came back, by the pre-roll a window needs for an onset,
    # and never before its own speech ended.
    assert cut(c, 2 * SR) == 2 * SR - LEAD
    assert cut(c, SR + MIN_PAUSE) == SR + MIN_PAUSE - LEAD


def test_the_last_piece_is_forced_and_the_rest_is_the_prompt() -> None:
    base = Context(0, ("An earlier final.",), "The prompt.")
    pieces = (Piece(SR, 3 * SR, "one two three"), Piece(3 * SR, 5 * SR, "four five"))
    ctx = context(pieces, base, chars=250)
    assert ctx == Context(3 * SR, ("four five",), "The prompt. An earlier final. one two three")
    # A last piece too long to force: the window starts at its end, its text prompts.
    ctx = context(pieces, base, chars=5)
    assert ctx.start == 5 * SR and ctx.finals == ()
    assert ctx.prompt.endswith("one two three four five")


# Three stretches of voice with pauses shorter than the endpoint (500 ms): one utterance.
SPEECH = [("silence", 0.5), ("voice", 1.5), ("silence", 0.4), ("voice", 1.5)]
SPEECH += [("silence", 0.4), ("voice", 1.0), ("silence", 1.0)]


def test_a_long_utterance_is_decoded_from_its_last_piece_and_reads_whole() -> None:
    run = drive(scripted_audio(SPEECH), SessionConfig(word_timestamps=True))
    (final,) = run.finals
    words = final.text.split()
    # One word a half second of voice, none lost or doubled (the fake reads each window's
    # words after its context from "alpha" again: a piece's words restart the count).
    assert len(words) == 8 and words[:3] == ["alpha", "bravo", "charlie"]
    # The last final decode (the speculation the endpoint confirmed) started at the second
    # piece: the first piece's end, just before the second stretch of voice.
    last = [r for r in run.requests if r.kind is DecodeKind.FINAL][-1]
    second_voice = int((0.5 + 1.5 + 0.4) * SR)
    assert window_key(last)[2] == second_voice - LEAD
    assert last.context == " ".join(words[3:6])  # the second piece, forced
    assert last.prompt is not None and last.prompt.endswith(" ".join(words[:3]))
    assert not last.prefix  # no stable words beyond the pieces
    # Its words are the pieces' and the tail's, in stream time and in order.
    assert [w.word for w in final.words] == final.text.split()
    starts = [w.start for w in final.words]
    assert starts == sorted(starts) and starts[3] >= second_voice / SR - 0.05


def test_without_a_pause_long_enough_the_utterance_is_decoded_from_its_start() -> None:
    short = [("silence", 0.5), ("voice", 1.5), ("silence", 0.2), ("voice", 1.0), ("silence", 1.0)]
    run = drive(scripted_audio(short), SessionConfig())
    (final,) = run.finals
    assert isinstance(final, Final) and len(final.text.split()) == 5
    last = [r for r in run.requests if r.kind is DecodeKind.FINAL][-1]
    assert window_key(last)[2] == final.start and not last.context


def test_no_pieces_where_decodes_take_no_context() -> None:
    run = drive(scripted_audio(SPEECH), SessionConfig(context_s=0))
    last = [r for r in run.requests if r.kind is DecodeKind.FINAL][-1]
    assert window_key(last)[2] == run.finals[0].start and not last.context


def test_a_speculation_speech_came_back_on_is_withdrawn_if_queued_and_used_if_it_ran() -> None:
    session = Session(SessionConfig(), session_id="t", classifier=EnergyClassifier())
    dec = FakeDecoder()
    audio = scripted_audio(SPEECH)
    back = int((0.5 + 1.5 + 0.4) * SR) + 6 * 320  # speech back, its onset decided
    spec, starts = None, []
    for i in range(0, back, 320):
        session.feed_audio(audio[i : i + 320])
        for r in session.poll_requests():
            starts.append(window_key(r)[2])
            if r.speculative:
                spec = r  # left unanswered: in flight when speech comes back
            else:
                (result,) = dec.decode_batch([r])
                session.on_result(result)
    assert spec is not None and session.in_flight == spec.request_id
    # Still queued, it would hold the partials back for a piece: the engine withdraws it.
    assert session.superseded == spec.request_id
    # Already running, it is used: its words make the piece, and decodes start there.
    (result,) = dec.decode_batch([spec])
    session.on_result(result)
    (partial,) = session.poll_requests()
    assert window_key(partial)[2] == starts[0]  # the first piece's start: the utterance's
    assert partial.context == "alpha bravo charlie" and not partial.prefix
