"""OpenAI's diarization fields, the pure part: ``known_speaker_names[]`` and
``known_speaker_references[]`` validated, and the speaker labels of diarized segments.

Labels are strings, as OpenAI's ``TranscriptionDiarizedSegment.speaker``: a known speaker's
name where the segment's voice matches that speaker's reference (cosine similarity of unit
embeddings reaching ``speakers.DEFAULT_THRESHOLD``), else a capital letter per cluster
("A", "B", ...; after "Z", "AA", ...) in the order the clusters are first heard.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
from kettle.transcribe.speakers.clusters import DEFAULT_THRESHOLD

MAX_KNOWN_SPEAKERS = 4  # OpenAI: "Up to 4 speakers are supported."
_DATA_URL = re.compile(
    r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[^;,]*)*?),(?P<data>.*)$", re.S
)


class SpeakerFieldError(ValueError):
    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def decode_data_url(url: str, param: str = "known_speaker_references") -> bytes:
    """The bytes of a base64 data URL (``data:audio/wav;base64,...``)."""
    found = _DATA_URL.match(url.strip())
    if found is None or ";base64" not in found["params"]:
        raise SpeakerFieldError(f"{param} must hold base64 data URLs "
                                "(data:audio/wav;base64,...).", param)  # fmt: skip
    try:
        data = base64.b64decode(found["data"].strip(), validate=True)
    except (binascii.Error, ValueError):
        raise SpeakerFieldError(f"{param} holds a data URL whose base64 is invalid.",
                                param) from None  # fmt: skip
    if not data:
        raise SpeakerFieldError(f"{param} holds an empty data URL.", param)
    return data


def known_speakers(
    names: Sequence[str], references: Sequence[str]
) -> tuple[tuple[str, bytes], ...]:
    """(name, reference audio bytes) pairs, in the order sent."""
    if len(names) != len(references):
        raise SpeakerFieldError(
            f"known_speaker_names has {len(names)} entries and known_speaker_references "
            f"{len(references)}; send one reference per name.",
            "known_speaker_references" if names else "known_speaker_names",
        )
    if len(names) > MAX_KNOWN_SPEAKERS:
        raise SpeakerFieldError(f"At most {MAX_KNOWN_SPEAKERS} known speakers are supported, "
                                f"not {len(names)}.", "known_speaker_names")  # fmt: skip
    cleaned = [n.strip() for n in names]
    if any(not n for n in cleaned):
        raise SpeakerFieldError("known_speaker_names holds an empty name.", "known_speaker_names")
    if len(set(cleaned)) != len(cleaned):
        raise SpeakerFieldError("known_speaker_names holds a name twice.", "known_speaker_names")
    return tuple((n, decode_data_url(r)) for n, r in zip(cleaned, references, strict=True))


def letter(index: int) -> str:
    """0 -> "A", 25 -> "Z", 26 -> "AA" (spreadsheet columns)."""
    out = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        out = chr(ord("A") + rest) + out
    return out


def name_segments(
    clusters: Sequence[int],
    embeddings: Sequence[np.ndarray | None],
    references: Sequence[tuple[str, np.ndarray]] = (),
    threshold: float = DEFAULT_THRESHOLD,
) -> list[str]:
    """One label per segment: ``clusters`` are the diarizer's speaker numbers, ``embeddings``
    the segments' voices (None: too short to embed), ``references`` the known speakers'."""
    named: list[str | None] = [_best(e, references, threshold) for e in embeddings]
    # A segment too short to embed takes the name most of its cluster's segments got.
    votes: dict[int, Counter[str]] = {}
    for c, n in zip(clusters, named, strict=True):
        if n is not None:
            votes.setdefault(c, Counter())[n] += 1
    taken = {name for name, _ in references}
    letters: dict[int, str] = {}
    out: list[str] = []
    for c, n, e in zip(clusters, named, embeddings, strict=True):
        if n is None and e is None and c in votes:
            n = votes[c].most_common(1)[0][0]
        if n is None:
            if c not in letters:
                letters[c] = _free_letter(taken)
                taken.add(letters[c])
            n = letters[c]
        out.append(n)
    return out


def _best(
    embedding: np.ndarray | None, references: Sequence[tuple[str, np.ndarray]], threshold: float
) -> str | None:
    if embedding is None or not references:
        return None
    sims = [float(ref @ embedding) for _, ref in references]
    best = int(np.argmax(sims))
    return references[best][0] if sims[best] >= threshold else None


def _free_letter(taken: set[str]) -> str:
    i = 0
    while letter(i) in taken:  # a known speaker named "A" keeps its name
        i += 1
    return letter(i)
