"""Deepgram Flux's (``/v2/listen``) handshake parameters and ``Configure`` fields. No I/O.

The ranges are Flux's documented ones: ``eot_threshold`` 0.5-1.0 (1.0: no end of turn on
confidence, only ``ForceEndTurn`` or the timeout), ``eager_eot_threshold`` 0.3-0.9 and at most
``eot_threshold``, ``eot_timeout_ms`` 500-60000.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs

from kettle.kernels.pcm import MAX_SAMPLE_RATE, MIN_SAMPLE_RATE
from kettle.streaming.protocols.deepgram_wire import (
    ListenParamError,
    parse_int,
    query_encoding,
    query_flag,
    query_values,
)
from kettle.transcribe import keyterms
from kettle.transcribe.errors import ConfigError

FLUX_PATH = "/v2/listen"
FLUX_MODELS = ("flux-general-en", "flux-general-multi")
DEFAULT_EOT_THRESHOLD = 0.7
DEFAULT_EOT_TIMEOUT_MS = 5000
EOT_RANGE = (0.5, 1.0)
EAGER_RANGE = (0.3, 0.9)
TIMEOUT_RANGE = (500, 60_000)
# The query parameters read; the others (tag, language_hint, ...) are accepted and ignored.
_READS = frozenset(
    {
        "model",
        "encoding",
        "sample_rate",
        "eot_threshold",
        "eager_eot_threshold",
        "eot_timeout_ms",
        "mip_opt_out",
        "numerals",
        "profanity_filter",
        "redact",
    }
)


@dataclass(frozen=True)
class Thresholds:
    """The end-of-turn settings a connection opens with and ``Configure`` changes."""

    eot_threshold: float = DEFAULT_EOT_THRESHOLD
    eager_eot_threshold: float | None = None  # None: no EagerEndOfTurn / TurnResumed
    eot_timeout_ms: int = DEFAULT_EOT_TIMEOUT_MS

    def __post_init__(self) -> None:
        if self.eager_eot_threshold is not None and self.eager_eot_threshold > self.eot_threshold:
            raise ListenParamError(
                f"eager_eot_threshold ({self.eager_eot_threshold}) must be at most "
                f"eot_threshold ({self.eot_threshold})"
            )

    def fields(self) -> dict[str, Any]:
        """As ``ConfigureSuccess.thresholds`` gives them."""
        out: dict[str, Any] = {
            "eot_threshold": self.eot_threshold,
            "eot_timeout_ms": self.eot_timeout_ms,
        }
        if self.eager_eot_threshold is not None:
            out["eager_eot_threshold"] = self.eager_eot_threshold
        return out


@dataclass(frozen=True)
class FluxParams:
    """One connection's settings, from the handshake's query string."""

    encoding: str  # Deepgram's name: linear16, mulaw or alaw
    sample_rate: int
    model: str = FLUX_MODELS[0]
    thresholds: Thresholds = Thresholds()
    keyterms: tuple[str, ...] = ()  # transcribe.keyterms.normalize's form
    language: str | None = "en"  # None: detect (flux-general-multi on a multilingual model)

    @property
    def frame_bytes(self) -> int:
        return 2 if self.encoding == "linear16" else 1


def parse_float(name: str, raw: Any, low: float, high: float) -> float:
    """A number within ``low..high``: from a query string or a JSON value (never a bool)."""
    if isinstance(raw, bool):
        raise ListenParamError(f"{name} must be a number, not {raw!r}")
    try:
        value = float(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        raise ListenParamError(f"{name} must be a number, not {raw!r}") from None
    if not low <= value <= high:  # (NaN fails this too)
        raise ListenParamError(f"{name} must be within {low}..{high}, not {raw!r}")
    return value


def parse_timeout(raw: Any) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str):
        raise ListenParamError(f"eot_timeout_ms must be an integer, not {raw!r}")
    return parse_int("eot_timeout_ms", raw, *TIMEOUT_RANGE)


def normalized_keyterms(terms: list[Any]) -> tuple[str, ...]:
    try:
        return keyterms.normalize(terms)
    except ConfigError as exc:
        raise ListenParamError(str(exc)) from None


def parse_flux_query(query: str, *, multilingual: bool, model_name: str) -> FluxParams:
    """The handshake's query string; ListenParamError (HTTP 400) names what is wrong."""
    one = query_values(query, _READS)
    model = one.get("model", FLUX_MODELS[0]).strip()
    if model not in FLUX_MODELS:
        raise ListenParamError(f"model must be one of {', '.join(FLUX_MODELS)}, not {model!r}")
    if model == "flux-general-multi" and not multilingual:
        raise ListenParamError(f"model flux-general-multi: the served {model_name} is English-only")
    rates = (MIN_SAMPLE_RATE, MAX_SAMPLE_RATE)
    if "encoding" in one:  # raw audio named: sample_rate is required, as on /v1/listen
        raw, rate = query_encoding(one, rates, containers=False)
        encoding = raw or "linear16"  # (never None without containers)
    else:  # kettle's Flux takes no containers: linear16, at 16 kHz unless sample_rate says
        encoding, rate = "linear16", 16000
        if "sample_rate" in one:
            rate = parse_int("sample_rate", one["sample_rate"], *rates)
    eot = DEFAULT_EOT_THRESHOLD
    if "eot_threshold" in one:
        eot = parse_float("eot_threshold", one["eot_threshold"], *EOT_RANGE)
    eager = None
    if "eager_eot_threshold" in one:
        eager = parse_float("eager_eot_threshold", one["eager_eot_threshold"], *EAGER_RANGE)
    timeout = DEFAULT_EOT_TIMEOUT_MS
    if "eot_timeout_ms" in one:
        timeout = parse_timeout(one["eot_timeout_ms"])
    query_flag(one, "mip_opt_out")  # validated; kettle keeps no audio to improve models with
    query_flag(one, "numerals")  # Whisper writes numerals as it hears fit: both accepted
    if query_flag(one, "profanity_filter"):
        raise ListenParamError("profanity_filter=true is not supported")
    if "redact" in one:
        raise ListenParamError("redact is not supported")
    pairs = parse_qs(query, keep_blank_values=True)  # (query_values decoded it already)
    return FluxParams(
        encoding=encoding,
        sample_rate=rate,
        model=model,
        thresholds=Thresholds(eot, eager, timeout),
        keyterms=normalized_keyterms(pairs.get("keyterm", [])),
        language=None if model == "flux-general-multi" else "en",
    )


@dataclass(frozen=True)
class ConfigureChange:
    """A valid ``Configure``: the new thresholds, and the new keyterms (None: unchanged)."""

    thresholds: Thresholds
    keyterms: tuple[str, ...] | None


def parse_configure(obj: Mapping[str, Any], current: Thresholds) -> ConfigureChange:
    """A ``Configure`` message against the current thresholds: all of it applies, or none
    (ListenParamError says why). Omitted fields keep their values."""
    changed: dict[str, Any] = {}
    raw = obj.get("thresholds")
    if raw is not None:
        if not isinstance(raw, dict):
            raise ListenParamError("thresholds must be an object")
        if raw.get("eot_threshold") is not None:
            changed["eot_threshold"] = parse_float(
                "eot_threshold", raw["eot_threshold"], *EOT_RANGE
            )
        if raw.get("eager_eot_threshold") is not None:
            changed["eager_eot_threshold"] = parse_float(
                "eager_eot_threshold", raw["eager_eot_threshold"], *EAGER_RANGE
            )
        if raw.get("eot_timeout_ms") is not None:
            changed["eot_timeout_ms"] = parse_timeout(raw["eot_timeout_ms"])
    terms = obj.get("keyterms")
    if terms is not None and not isinstance(terms, list):
        raise ListenParamError("keyterms must be a list of strings")
    hints = obj.get("language_hints")
    if hints:  # an empty list clears hints, which kettle never had
        raise ListenParamError("language_hints are not supported")
    if obj.get("profanity_filter") is True:
        raise ListenParamError("profanity_filter is not supported")
    return ConfigureChange(
        replace(current, **changed),
        normalized_keyterms(terms) if terms is not None else None,
    )


__all__ = [
    "FLUX_MODELS",
    "FLUX_PATH",
    "ConfigureChange",
    "FluxParams",
    "Thresholds",
    "parse_configure",
    "parse_flux_query",
]
