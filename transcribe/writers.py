"""Render a transcript as txt, srt, vtt or json, and write files atomically.

Every file is written to a temporary name in the target folder and renamed over the target, so
a crash or a full disk never leaves a half-written transcript behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

from kettle.transcribe.errors import ConfigError
from kettle.transcribe.transcript import Segment, Transcript

FORMATS = ("txt", "srt", "vtt", "json")
LINE_WIDTH = 42  # the usual subtitle line length


def parse_formats(spec: str) -> tuple[str, ...]:
    """``"srt,txt"`` -> ``("srt", "txt")``; unknown names are a ConfigError."""
    names = [n.strip().lower() for n in spec.split(",") if n.strip()]
    if not names:
        raise ConfigError("no output format given")
    bad = [n for n in names if n not in FORMATS]
    if bad:
        raise ConfigError(f"unknown format {', '.join(bad)} (choose from {', '.join(FORMATS)})")
    return tuple(dict.fromkeys(names))


def format_txt(transcript: Transcript) -> str:
    lines = [s.text.strip() for s in transcript.segments if s.text.strip()]
    return "\n".join(lines) + ("\n" if lines else "")


def _timestamp(seconds: float, sep: str) -> str:
    ms = max(0, round(seconds * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def _cues(segments: Sequence[Segment]) -> list[tuple[int, int, str]]:
    """Cue times in ms, made strictly increasing and non-overlapping whatever comes in."""
    cues: list[tuple[int, int, str]] = []
    prev_end = 0
    for seg in segments:
        text = seg.text.strip()
        if not text:
            continue
        start = max(round(seg.start * 1000), prev_end)
        end = max(round(seg.end * 1000), start + 1)
        cues.append((start, end, "\n".join(textwrap.wrap(text, LINE_WIDTH)) or text))
        prev_end = end
    return cues


def format_srt(transcript: Transcript) -> str:
    blocks = [
        f"{i}\n{_timestamp(s / 1000, ',')} --> {_timestamp(e / 1000, ',')}\n{text}\n"
        for i, (s, e, text) in enumerate(_cues(transcript.segments), start=1)
    ]
    return "\n".join(blocks)


def format_vtt(transcript: Transcript) -> str:
    blocks = [
        f"{_timestamp(s / 1000, '.')} --> {_timestamp(e / 1000, '.')}\n{text}\n"
        for s, e, text in _cues(transcript.segments)
    ]
    return "WEBVTT\n\n" + "\n".join(blocks)


def format_json(transcript: Transcript) -> str:
    return transcript.to_json() + "\n"


RENDERERS: dict[str, Callable[[Transcript], str]] = {
    "txt": format_txt,
    "srt": format_srt,
    "vtt": format_vtt,
    "json": format_json,
}


def render(transcript: Transcript, fmt: str) -> str:
    try:
        return RENDERERS[fmt](transcript)
    except KeyError:
        raise ConfigError(f"unknown format {fmt!r}") from None


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_outputs(transcript: Transcript, base: Path, formats: Sequence[str]) -> list[Path]:
    """Write ``base.<fmt>`` for each format; returns the paths written.

    Everything is rendered before anything is written, so a rendering bug writes nothing.
    """
    rendered = [(base.with_name(f"{base.name}.{fmt}"), render(transcript, fmt)) for fmt in formats]
    for path, text in rendered:
        atomic_write_text(path, text)
    return [path for path, _ in rendered]
