"""argparse value types shared by every `kettle` subcommand: a bad value is a usage error."""

from __future__ import annotations

import argparse


def _number(text: str, kind: type[int] | type[float]) -> int | float:
    try:
        return kind(text)
    except ValueError:
        noun = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None


def positive_int(text: str) -> int:
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = int(_number(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(_number(text, float))
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def non_negative_float(text: str) -> float:
    value = float(_number(text, float))
    if not value >= 0 or value == float("inf"):  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"must be a non-negative number, got {text}")
    return value


def speaker_count(text: str) -> int:
    value = int(_number(text, int))
    if not 1 <= value <= 16:
        raise argparse.ArgumentTypeError(f"must be within 1..16, got {value}")
    return value
