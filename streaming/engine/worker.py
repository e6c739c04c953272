"""The inference worker: the one thread that touches the model, and the failure policy.

``run`` decodes one batch in a single-worker executor and never raises: it returns an
``Outcome`` (results or an error). The worker keeps the model's health:

- a batch refused as invalid input (``ConfigError``) says nothing about the model;
- every other failure counts; after ``n`` failures in a row the next batch waits
  ``min(backoff_max_s, backoff_base_s * 2 ** (n - 1))`` (``ready_at``), so a broken model
  is not hammered in a loop, and from ``failing_after`` failures in a row the model counts as
  failing (readiness turns false) until a batch succeeds again.

``RetryPolicy.retries`` is how often the engine retries one failed request on its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from kettle.streaming.engine.clock import Clock
from kettle.transcribe.errors import ConfigError, KettleError
from kettle.transcribe.types import Decoder, DecodeRequest, DecodeResult

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 1  # a failed final (or offline request) is retried this often, alone
    backoff_base_s: float = 0.1
    backoff_max_s: float = 10.0
    failing_after: int = 3  # model failures in a row that make the model "failing"

    def __post_init__(self) -> None:
        if not 0 <= self.retries <= 10:
            raise ConfigError(f"retries must be within 0..10, not {self.retries}")
        if not 0.0 <= self.backoff_base_s <= self.backoff_max_s <= 3600:
            raise ConfigError("need 0 <= backoff_base_s <= backoff_max_s <= 3600")
        if not 1 <= self.failing_after <= 1000:
            raise ConfigError(f"failing_after must be within 1..1000, not {self.failing_after}")

    def backoff_s(self, failures: int) -> float:
        if failures <= 0:
            return 0.0
        return min(self.backoff_max_s, self.backoff_base_s * 2.0 ** min(failures - 1, 60))


@dataclass(frozen=True)
class Outcome:
    results: list[DecodeResult] | None
    error: str | None
    decode_s: float
    bad_input: bool = False  # refused as invalid (ConfigError): not a model failure


class InferenceWorker:
    def __init__(self, clock: Clock, policy: RetryPolicy | None = None) -> None:
        self._clock = clock
        self.policy = policy or RetryPolicy()
        self._executor: ThreadPoolExecutor | None = None
        self._failures = 0  # model failures in a row
        self._last_failure: float | None = None
        self.busy = False

    def start(self) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="kettle-inference"
            )

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    # --- health --------------------------------------------------------------------------
    @property
    def consecutive_failures(self) -> int:
        return self._failures

    @property
    def model_failing(self) -> bool:
        return self._failures >= self.policy.failing_after

    @property
    def ready_at(self) -> float | None:
        """When the next batch may run (after a failure), or None: at once."""
        if not self._failures or self._last_failure is None:
            return None
        return self._last_failure + self.policy.backoff_s(self._failures)

    # --- work ----------------------------------------------------------------------------
    async def call(self, fn: Callable[[], T]) -> T:
        """Run anything else that touches the model (start-up measurements) on its thread."""
        if self._executor is None:
            raise KettleError("the inference worker is not running")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def run(self, decoder: Decoder, requests: Sequence[DecodeRequest]) -> Outcome:
        if self._executor is None:
            raise KettleError("the inference worker is not running")
        loop = asyncio.get_running_loop()
        self.busy = True
        try:
            outcome = await loop.run_in_executor(self._executor, decode, decoder, list(requests))
        finally:
            self.busy = False
        if outcome.results is not None:
            self._failures = 0
        elif not outcome.bad_input:
            self._failures += 1
            self._last_failure = self._clock.now()
        return outcome


def decode(decoder: Decoder, requests: list[DecodeRequest]) -> Outcome:
    """Runs in the inference thread; results in request order, or the error."""
    t0 = time.perf_counter()
    try:
        results = decoder.decode_batch(requests)
        if len(results) != len(requests):
            raise KettleError(f"decoder returned {len(results)} results for {len(requests)}")
        ordered = list(results)
        ids = [r.request_id for r in requests]
        if len(set(ids)) == len(ids):  # unique ids: trust them over the order
            by_id: dict[Hashable, DecodeResult] = {r.request_id: r for r in results}
            ordered = [by_id.get(i, res) for i, res in zip(ids, results, strict=True)]
    except ConfigError as exc:
        return _failed(exc, t0, bad_input=True)
    except Exception as exc:
        return _failed(exc, t0)
    return Outcome(ordered, None, time.perf_counter() - t0)


def _failed(exc: Exception, t0: float, *, bad_input: bool = False) -> Outcome:
    return Outcome(None, f"{type(exc).__name__}: {exc}", time.perf_counter() - t0, bad_input)
