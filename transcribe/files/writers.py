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


def speaker_name(speaker: int) -> str:
    """Speakers are 0-based in the JSON form and 1-based for people: 0 -> "Speaker 1"."""
    return f"Speaker {speaker + 1}"


def format_txt(transcript: Transcript) -> str:
    """One line per segment; with speakers, one ``[Speaker N] ...`` line per turn."""
    lines: list[str] = []
    previous: int | None = None
    for seg in transcript.segments:
        text = seg.text.strip()
        if not text:
            continue
        if seg.speaker is None:
            lines.append(text)
        elif seg.speaker == previous and lines:
            lines[-1] += " " + text
        else:
            lines.append(f"[{speaker_name(seg.speaker)}] {text}")
        previous = seg.speaker
    return "\n".join(lines) + ("\n" if lines else "")


def _timestamp(seconds: float, sep: str) -> str:
    ms = max(0, round(seconds * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


Cue = tuple[int, int, str, int | None]  # start ms, end ms, wrapped text, speaker


def _cues(segments: Sequence[Segment]) -> list[Cue]:
    """Cue times in ms, made strictly increasing and non-overlapping whatever comes in.

    One cue per segment, never merged, so a cue never holds two speakers' words."""
    cues: list[Cue] = []
    prev_end = 0
    for seg in segments:
        text = seg.text.strip()
        if not text:
            continue
        start = max(round(seg.start * 1000), prev_end)
        end = max(round(seg.end * 1000), start + 1)
        cues.append((start, end, "\n".join(textwrap.wrap(text, LINE_WIDTH)) or text, seg.speaker))
        prev_end = end
    return cues


def format_srt(transcript: Transcript) -> str:
    blocks = [
        f"{i}\n{_timestamp(s / 1000, ',')} --> {_timestamp(e / 1000, ',')}\n"
        f"{'' if who is None else f'[{speaker_name(who)}] '}{text}\n"
        for i, (s, e, text, who) in enumerate(_cues(transcript.segments), start=1)
    ]
    return "\n".join(blocks)


def format_vtt(transcript: Transcript) -> str:
    # A voice span per line: WebVTT's <v> ends at the end of its cue text line.
    blocks = [
        f"{_timestamp(s / 1000, '.')} --> {_timestamp(e / 1000, '.')}\n"
        + (text if who is None else _voiced(text, speaker_name(who)))
        + "\n"
        for s, e, text, who in _cues(transcript.segments)
    ]
    return "WEBVTT\n\n" + "\n".join(blocks)


def _voiced(text: str, name: str) -> str:
    return "\n".join(f"<v {name}>{line}" for line in text.split("\n"))


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
