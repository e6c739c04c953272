"""The encoder (transcribe/model/encoder.py) on a fake model: each request's input length is its
own, recorded where the padding happens (the model's encode call)."""

from __future__ import annotations

import numpy as np
import pytest
from kettle.transcribe.model.encoder import Encoder, group_by_frames
from kettle.transcribe.model.job import Job
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeRequest, encoder_frames

from tests.transcribe.conftest import EncoderCalls

P, F = DecodeKind.PARTIAL, DecodeKind.FINAL


def _tone(seconds: float, hz: float) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE), dtype=np.float32) / SAMPLE_RATE
    return (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def _jobs(*requests: DecodeRequest) -> list[Job]:
    return [Job(i, r, np.asarray(r.audio, dtype=np.float32)) for i, r in enumerate(requests)]


def _only_row(calls: EncoderCalls, frames: int) -> np.ndarray:
    """The one row the model was given at this input length."""
    rows = [row for row in calls.rows() if row.shape[-1] == frames]
    assert len(rows) == 1, [row.shape for row in calls.rows()]
    return rows[0]


@pytest.mark.parametrize("kind", [P, F])
def test_a_request_gets_the_same_encoder_input_alone_and_in_a_mixed_batch(
    fake_encoder: tuple[Encoder, EncoderCalls], kind: DecodeKind
) -> None:
    encoder, calls = fake_encoder
    clip = _tone(2.3, 440.0)
    frames = encoder_frames(clip.shape[0], 1.0)
    (alone,) = jobs = _jobs(DecodeRequest(audio=clip, kind=kind, encode_min_s=1.0, cache_key="a"))
    encoder.encode(jobs)
    given_alone = _only_row(calls, frames)
    calls.calls.clear()
    # Batch-mates longer and shorter than the clip, one on Whisper's full 30 s (an upload's
    # default before encode_min_s): under the old rule the clip was padded to 30 s here.
    batch = _jobs(
        DecodeRequest(audio=_tone(6.4, 220.0), kind=kind, encode_min_s=1.0),
        DecodeRequest(audio=clip, kind=kind, encode_min_s=1.0, cache_key="b"),
        DecodeRequest(audio=_tone(0.8, 880.0), kind=kind, encode_min_s=1.0),
        DecodeRequest(audio=_tone(3.0, 330.0), kind=kind),
    )
    encoder.encode(batch)
    mixed = batch[1]
    assert mixed.frames == alone.frames == frames == 400
    assert [j.frames for j in batch] == [800, 400, 200, 3000]
    np.testing.assert_array_equal(_only_row(calls, frames), given_alone)  # bit-identical
    assert alone.encoded is not None and mixed.encoded is not None
    np.testing.assert_array_equal(mixed.encoded, alone.encoded)
    # One encoder pass per input length, each row as long as its own request asks.
    assert sorted(call.shape[-1] for call in calls.calls) == [200, 400, 800, 3000]
    assert all(j.encoded is not None and j.encoded.shape[0] == j.frames // 2 for j in batch)


def test_same_length_requests_share_one_encoder_pass(
    fake_encoder: tuple[Encoder, EncoderCalls],
) -> None:
    encoder, calls = fake_encoder
    jobs = _jobs(
        *(DecodeRequest(audio=_tone(s, 300.0 + s), kind=F, encode_min_s=5.0) for s in (1, 2, 3.5))
    )
    encoder.encode(jobs)
    assert [call.shape for call in calls.calls] == [(3, 80, 500)]
    assert [len(g) for g in group_by_frames(jobs)] == [3]
    encoder.stack(jobs)  # one length: stackable for generate


def test_a_cached_encoding_is_reused_whatever_the_batch(
    fake_encoder: tuple[Encoder, EncoderCalls],
) -> None:
    encoder, calls = fake_encoder
    clip = _tone(1.5, 500.0)
    encoder.encode(_jobs(DecodeRequest(audio=clip, kind=P, encode_min_s=1.0)))
    # The key holds the request's own input length, so a longer batch-mate no longer turns
    # the same window into a miss.
    batch = _jobs(
        DecodeRequest(audio=clip.copy(), kind=F, encode_min_s=1.0),
        DecodeRequest(audio=_tone(9.0, 250.0), kind=F, encode_min_s=1.0),
    )
    encoder.encode(batch)
    assert [j.cache_hit for j in batch] == [True, False]
    assert [call.shape[-1] for call in calls.calls] == [300, 1000]
    assert (encoder.cache.hits, encoder.cache.misses) == (1, 2)


def test_rows_of_differing_lengths_are_never_stacked(
    fake_encoder: tuple[Encoder, EncoderCalls],
) -> None:
    encoder, _ = fake_encoder
    jobs = _jobs(
        DecodeRequest(audio=_tone(1.0, 400.0), kind=P, encode_min_s=1.0),
        DecodeRequest(audio=_tone(4.0, 600.0), kind=P, encode_min_s=1.0),
        DecodeRequest(audio=_tone(0.9, 700.0), kind=P, encode_min_s=1.0),
    )
    encoder.encode(jobs)
    groups = group_by_frames(jobs)
    assert [[j.index for j in g] for g in groups] == [[0, 2], [1]]
    for group in groups:
        encoder.stack(group)
    with pytest.raises(ValueError, match="differing shapes"):
        encoder.stack(jobs)
