"""server.metrics: the arrival log and the server metrics."""

from __future__ import annotations

from types import SimpleNamespace

from kettle.streaming.engine.report import BatchReport
from kettle.streaming.server.metrics import ArrivalLog, ServerMetrics, encoder_cache_bytes


def test_arrival_log_maps_16k_samples_to_input_messages() -> None:
    log = ArrivalLog(sample_rate=8000)
    log.record(800, 1.0)  # input frames 0..800 (= 16 kHz samples 0..1600) arrived at t=1
    log.record(800, 1.5)  # no new frames: ignored
    log.record(1600, 2.0)
    log.record(2400, 3.0)
    assert log.arrival_of(0) == 1.0
    assert log.arrival_of(1600) == 1.0
    assert log.arrival_of(1601) == 2.0
    assert log.arrival_of(4800) == 3.0
    assert log.arrival_of(10**9) == 3.0  # past the end (resampler tail): the last message
    log.prune_before(3300)
    assert len(log) == 2
    assert log.arrival_of(3200) == 2.0
    assert log.arrival_of(3300) == 3.0


def test_metrics_render_and_observer() -> None:
    m = ServerMetrics()
    m.on_batch(BatchReport(4, 1, (0.01, 0.02, 0.03, 0.04), 0.2, cache_hits=2))
    m.on_batch_failed(2, "boom")
    m.errors.labels(code="bad_audio").inc()
    text = m.render().decode()
    for name in (
        "kettle_sessions_active",
        "kettle_sessions_total",
        "kettle_audio_seconds_total",
        "kettle_partial_lag_seconds_bucket",
        "kettle_final_lag_seconds_bucket",
        "kettle_queue_wait_seconds_count 4.0",
        "kettle_batch_size_sum 4.0",
        "kettle_decode_seconds_count 1.0",
        "kettle_encoder_cache_hits_total 2.0",
        'kettle_errors_total{code="bad_audio"} 1.0',
    ):
        assert name in text, name
    assert m.value("kettle_batches_failed_total") == 1.0
    # Private registries: a second server's metrics start from zero.
    assert ServerMetrics().value("kettle_encoder_cache_hits_total") == 0.0


def test_encoder_cache_bytes_counts_each_decoder_once() -> None:
    def decoder(held: int) -> SimpleNamespace:
        return SimpleNamespace(cache_stats=lambda: SimpleNamespace(hits=0, misses=0, bytes=held))

    live, final = decoder(1000), decoder(250)
    no_bytes = SimpleNamespace(cache_stats=lambda: SimpleNamespace(hits=0, misses=0))
    # The engine's live, final and refine decoders are often one and the same.
    assert encoder_cache_bytes((live, final, live, no_bytes, object())) == 1250
    m = ServerMetrics()
    m.encoder_cache_bytes.set(encoder_cache_bytes((live, live, live)))
    assert m.value("kettle_encoder_cache_bytes") == 1000
