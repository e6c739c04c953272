"""Deepgram Flux's (``/v2/listen``) handshake parameters and ``Configure`` fields. No I/O.

Both are checked against deepgram_fields' tables. The ranges are Flux's documented ones:
``eot_threshold`` 0.5-1.0 (1.0: no end of turn on confidence, only ``ForceEndTurn`` or the
timeout), ``eager_eot_threshold`` 0.3-0.9 and at most ``eot_threshold``, ``eot_timeout_ms``
500-60000.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kettle.streaming.protocols.deepgram.fields import (
    FLUX_CONFIGURE,
    FLUX_MODELS,
    FLUX_QUERY,
    FLUX_THRESHOLDS,
)
from kettle.streaming.protocols.deepgram.wire import (
    ListenParamError,
    checked_query,
    query_encoding,
    query_flag,
    query_lists,
)
from kettle.streaming.protocols.fields import NUMBER, FieldError
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.model import keyterms

FLUX_PATH = "/v2/listen"
DEFAULT_EOT_THRESHOLD = 0.7
DEFAULT_EOT_TIMEOUT_MS = 5000


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


def normalized_keyterms(terms: list[Any]) -> tuple[str, ...]:
    try:
        return keyterms.normalize(terms)
    except ConfigError as exc:
        raise ListenParamError(str(exc)) from None


def parse_flux_query(query: str, *, multilingual: bool, model_name: str) -> FluxParams:
    """The handshake's query string; ListenParamError (HTTP 400) names what is wrong."""
    return flux_params(query_lists(query), multilingual=multilingual, model_name=model_name)


def flux_params(
    values: Mapping[str, Sequence[str]], *, multilingual: bool, model_name: str
) -> FluxParams:
    """A decoded handshake query (`query_lists`), checked against ``FLUX_QUERY``: ``model``
    is required, the eot settings bounded; ``mip_opt_out``, ``numerals``, ``tag`` and
    ``language_hint`` are checked, then ignored; ``profanity_filter=true`` and ``redact``
    are refused; undocumented parameters are never read."""
    fields = checked_query(values, FLUX_QUERY)
    model = fields["model"]
    if model == "flux-general-multi" and not multilingual:
        raise ListenParamError(f"model flux-general-multi: the served {model_name} is English-only")
    if "encoding" in fields:  # raw audio named: sample_rate is required, as on /v1/listen
        raw, rate = query_encoding(fields, containers=False)
        encoding = raw or "linear16"  # (never None without containers)
    else:  # kettle's Flux takes no containers: linear16, at 16 kHz unless sample_rate says
        encoding, rate = "linear16", fields.get("sample_rate", 16000)
    if query_flag(fields, "profanity_filter"):
        raise ListenParamError("profanity_filter=true is not supported")
    if "redact" in fields:
        raise ListenParamError("redact is not supported")
    thresholds = Thresholds(
        float(fields.get("eot_threshold", DEFAULT_EOT_THRESHOLD)),
        fields.get("eager_eot_threshold"),
        fields.get("eot_timeout_ms", DEFAULT_EOT_TIMEOUT_MS),
    )
    return FluxParams(
        encoding=encoding,
        sample_rate=rate,
        model=model,
        thresholds=thresholds,
        keyterms=normalized_keyterms(fields.get("keyterm", ())),
        language=None if model == "flux-general-multi" else "en",
    )


@dataclass(frozen=True)
class ConfigureChange:
    """A valid ``Configure``: the new thresholds, and the new keyterms (None: unchanged)."""

    thresholds: Thresholds
    keyterms: tuple[str, ...] | None


def parse_configure(obj: Mapping[str, Any], current: Thresholds) -> ConfigureChange:
    """A ``Configure`` message against the current thresholds, checked against
    ``FLUX_CONFIGURE`` and ``FLUX_THRESHOLDS``: all of it applies, or none (ListenParamError
    says why). Omitted (or null) fields keep their values; ``numerals`` is checked and
    ignored (Whisper writes numerals as it hears fit); non-empty ``language_hints`` are
    refused (kettle's multilingual Flux detects the language unhinted)."""
    try:
        FLUX_CONFIGURE.check_json(obj)
        changed: dict[str, Any] = {}
        thresholds = obj.get("thresholds")
        if thresholds is not None:
            FLUX_THRESHOLDS.check_json(thresholds)
            for spec in FLUX_THRESHOLDS.fields:
                value = thresholds.get(spec.name)
                if value is not None:
                    changed[spec.name] = float(value) if spec.kind == NUMBER else value
    except FieldError as exc:
        raise ListenParamError(str(exc)) from None
    terms = obj.get("keyterms")
    if obj.get("language_hints"):  # an empty list clears hints, which kettle never had
        raise ListenParamError("language_hints are not supported")
    return ConfigureChange(
        replace(current, **changed),
        normalized_keyterms(list(terms)) if terms is not None else None,
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
