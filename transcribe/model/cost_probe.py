"""Measure what the model costs on this device (start-up, about a second on a 2-core CPU).

The encoder is timed at batch sizes 1 and 2 (and 8 where two cost clearly less than twice
one: a GPU); the decoder greedy over 1 and 8 rows with end-of-text suppressed, so it generates
exactly as many tokens as asked, the difference of two lengths giving the cost per token.
Each timing is the least of ``REPEATS`` runs: whatever else the machine does only adds time,
and a profile measured under load is kept (cost_cache) and paces every later start (a
busy test run once stored a decoder step 35x too slow, and partials came 0.6 s apart, not 0.5).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from kettle.transcribe.model.costs import CostProfile
from kettle.transcribe.model.prompts import PromptBuilder

N_FRAMES = 3000
REPEATS = 2


def fastest(run: Callable[[], Any]) -> tuple[float, Any]:
    """The least wall time of ``REPEATS`` calls of ``run`` (load only adds time), and what
    the last call returned."""
    best, out = math.inf, None
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        out = run()
        best = min(best, time.perf_counter() - t0)
    return best, out


def measure(ct2: Any, fw: Any, prompts: PromptBuilder, device: str) -> CostProfile:
    rng = np.random.default_rng(0)
    n_mels = int(ct2.n_mels)

    def features(n: int) -> Any:
        return fw.storage((rng.standard_normal((n, n_mels, N_FRAMES)) * 0.1).astype(np.float32))

    def encode_s(n: int) -> float:
        storage = features(n)
        return fastest(lambda: ct2.encode(storage, to_cpu=False))[0]

    # A warm-up (first calls allocate), whose output feeds the decoder.
    encoded = ct2.encode(features(1), to_cpu=True)
    enc = {n: encode_s(n) for n in (1, 2)}
    if enc[2] < 1.5 * enc[1]:
        enc[8] = encode_s(8)
    tok = prompts.tokenizer("en")
    prompt = [*list(tok.sot_sequence), tok.no_timestamps]
    suppress = [*prompts.suppress_tokens(), tok.eot]
    one = fw.to_numpy(encoded)
    steps: dict[int, float] = {}
    for rows in (1, 8):
        rows_enc = fw.storage(np.ascontiguousarray(np.repeat(one, rows, axis=0)))
        timing = []
        for want in (2, 18):
            seconds, res = fastest(
                partial(
                    ct2.generate,
                    rows_enc,
                    [prompt] * rows,
                    max_length=max(2 * want, len(prompt) - 1 + want),
                    beam_size=1,
                    suppress_tokens=suppress,
                    suppress_blank=False,
                )
            )
            timing.append((len(res[0].sequences_ids[0]), seconds))
        (n0, s0), (n1, s1) = timing
        steps[rows] = max(0.0, (s1 - s0) / max(1, n1 - n0))
    return CostProfile(tuple(enc.items()), tuple(steps.items()), device=device)
