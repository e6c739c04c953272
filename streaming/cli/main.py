"""The `kettle` console script: one parser, subcommands registered by the modules that own them."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from kettle.streaming.cli import allocator
from kettle.streaming.cli.serve import register_serve, register_stream
from kettle.streaming.cli.simulate import register_simulate
from kettle.transcribe.cli.models import register_models
from kettle.transcribe.cli.transcribe import register_transcribe
from kettle.transcribe.errors import KettleError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kettle",
        description="Streaming speech transcription with batched int8 Whisper.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    register_transcribe(sub)
    register_models(sub)
    register_simulate(sub)
    register_serve(sub)
    register_stream(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        if argv is None and getattr(args, "allocator", None):
            # A real command line (not a call from Python): the server's malloc is chosen
            # by re-executing before anything starts (allocator.py).
            args.allocator = allocator.ensure(args.allocator)
        return int(args.func(args) or 0)
    except KettleError as exc:
        print(f"kettle: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kettle: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
