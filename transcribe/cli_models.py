"""Placeholder for the `kettle models` subcommand; its owner replaces this module."""

from __future__ import annotations

import argparse
from typing import Any


def register_models(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser("models", help="(not built yet)")
    parser.set_defaults(func=lambda args: 1)
