"""Placeholder for the `kettle transcribe` subcommand; its owner replaces this module."""

from __future__ import annotations

import argparse
from typing import Any


def register_transcribe(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser("transcribe", help="(not built yet)")
    parser.set_defaults(func=lambda args: 1)
