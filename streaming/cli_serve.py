"""Placeholder for the `kettle serve` subcommand; its owner replaces this module."""

from __future__ import annotations

import argparse
from typing import Any


def register_serve(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser("serve", help="(not built yet)")
    parser.set_defaults(func=lambda args: 1)


def register_stream(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser("stream", help="(not built yet)")
    parser.set_defaults(func=lambda args: 1)
