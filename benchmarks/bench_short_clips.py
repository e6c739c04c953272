"""Short clips over REST: kettle against plain faster-whisper on the same clips (issue 37).

Whisper reads short clips badly when they are padded with zeros to a long window; a REST
upload of a short clip should be read as well as the model can read it, and never come back
as a repeated-token loop ("s s s s").

A real ``kettle serve`` (defaults: tiny.en) runs on 127.0.0.1 on a free port; each clip is
posted as a 16 kHz mono 16-bit WAV with the official OpenAI Python SDK
(``client.audio.transcriptions.create(model="whisper-1", file=...)``, its default
response_format), one clip at a time. Plain faster-whisper reads the same audio:
``WhisperModel(resolve_model("tiny.en"), device="cpu", compute_type="int8",
cpu_threads=2).transcribe(audio, beam_size=5)``, one clip at a time.

Groups:

- ``commands``: the eval set's six ``command_short`` clips (manifest.tsv column
  ``category``; ps__goforward.raw is headerless s16le 16 kHz mono).
- ``jfk_fragments``: tests/data/jfk.flac after 1 s of silence, cut as Pipecat's
  OpenAISTTService posts it after its default ``SileroVADAnalyzer()`` (confidence 0.7, stop
  after 0.2 s): Silero VAD (``faster_whisper.vad.get_speech_timestamps`` with
  ``VadOptions(threshold=0.7, min_silence_duration_ms=200, min_speech_duration_ms=200,
  speech_pad_ms=0)``); each fragment runs from max(the previous fragment's end, speech
  start - 1.0 s) to speech end + 0.2 s. A fragment's reference is the words of JFK's sentence
  it covers: plain faster-whisper transcribes the whole padded file with word timestamps, its
  words are aligned to the reference sentence's (difflib on normalized words; a reference
  word it missed takes the time of the word before it), and each fragment gets the reference
  words whose midpoints fall inside it.

Per group: WER (Whisper's EnglishTextNormalizer, jiwer; the group's clips as one corpus) for
kettle over REST and for plain faster-whisper, each clip's two texts, and repeated-token loops
(one token 3+ times back to back; there must be none).

    python benchmarks/bench_short_clips.py            # KETTLE_EVAL_DIR or ../shared/eval

Writes benchmarks/bench_short_clips.json and its RESULTS.md section.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import io
import json
import os
import sys
import time
import wave
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import eval_dir, machine_info, markdown_table, require_eval_set, write_section
from _serve import kettle_serving
from bench_accuracy import Item as Clip  # one clip: 16 kHz audio, what it says

SR = 16000
KEY = "short-clips-key"
MODEL = "tiny.en"
JFK_PATH = Path(__file__).resolve().parents[1] / "tests" / "data" / "jfk.flac"
JFK_TEXT = (
    "And so my fellow Americans, ask not what your country can do for you, "
    "ask what you can do for your country."
)
LEAD_S = 1.0  # silence before JFK
PRE_S = 1.0  # Pipecat keeps up to 1 s of audio before the VAD's start
STOP_S = 0.2  # and sends the segment 0.2 s after the speech ends
SECTION = "bench_short_clips"


# --- clips -------------------------------------------------------------------------------
def command_clips(path: Path, *, category: str = "command_short") -> list[Clip]:
    """The manifest's clips of ``category`` (a ``.raw`` file is s16le 16 kHz mono)."""
    from kettle.transcribe.audio.read import RawFormat, load_audio

    with open(path / "manifest.tsv", newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if r["category"] == category]
    clips = []
    for row in rows:
        file = path / row["file"]
        raw = RawFormat.parse("s16le:16000:1") if file.suffix == ".raw" else None
        clips.append(Clip(file.name, load_audio(file, raw=raw), row["reference_text"]))
    return clips


def padded_jfk() -> np.ndarray:
    from kettle.transcribe.audio.read import load_audio

    lead = np.zeros(int(LEAD_S * SR), np.float32)
    return np.concatenate([lead, load_audio(JFK_PATH).astype(np.float32)])


def vad_cuts(audio: np.ndarray) -> list[tuple[int, int]]:
    """Pipecat's fragments, in samples: Silero at its defaults, 1 s before, 0.2 s after."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    options = VadOptions(
        threshold=0.7, min_silence_duration_ms=200, min_speech_duration_ms=200, speech_pad_ms=0
    )
    cuts: list[tuple[int, int]] = []
    for seg in get_speech_timestamps(audio, options, sampling_rate=SR):
        prev_end = cuts[-1][1] if cuts else 0
        start = max(prev_end, int(seg["start"]) - int(PRE_S * SR))
        end = min(len(audio), int(seg["end"]) + int(STOP_S * SR))
        if end > start:
            cuts.append((start, end))
    return cuts


def words_of(text: str) -> list[str]:
    from whisper_normalizer.english import EnglishTextNormalizer

    return str(EnglishTextNormalizer()(text)).split()


def reference_midpoints(audio: np.ndarray, model: Any, reference: str) -> list[tuple[str, float]]:
    """Each word of ``reference`` (as written) and its midpoint in seconds, from plain
    faster-whisper's word timestamps on ``audio`` aligned to the reference's words."""
    segments, _ = model.transcribe(audio, beam_size=5, word_timestamps=True)
    heard = [(w.word, (w.start + w.end) / 2) for s in segments for w in (s.words or [])]
    heard_norm = [" ".join(words_of(w)) for w, _ in heard]
    ref_words = reference.split()
    ref_norm = [" ".join(words_of(w)) for w in ref_words]
    times: list[float | None] = [None] * len(ref_words)
    matcher = difflib.SequenceMatcher(a=ref_norm, b=heard_norm, autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            times[block.a + k] = heard[block.b + k][1]
    out: list[tuple[str, float]] = []
    last = 0.0
    for word, t in zip(ref_words, times, strict=True):
        last = last if t is None else t
        out.append((word, last))
    return out


def jfk_fragments(model: Any) -> list[Clip]:
    """JFK after 1 s of silence, cut as Pipecat's OpenAISTTService posts it."""
    audio = padded_jfk()
    timed = reference_midpoints(audio, model, JFK_TEXT)
    clips = []
    for k, (start, end) in enumerate(vad_cuts(audio)):
        ref = " ".join(w for w, t in timed if start / SR <= t < end / SR)
        name = f"jfk{k + 1} {start / SR:.2f}-{end / SR:.2f}s"
        clips.append(Clip(name, audio[start:end], ref))
    return clips


# --- readers -----------------------------------------------------------------------------
def wav_bytes(audio: np.ndarray) -> bytes:
    """16 kHz mono 16-bit WAV."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
    return buf.getvalue()


def post_all(base: str, clips: Sequence[Clip], key: str = KEY) -> list[str]:
    """Each clip posted alone with the official OpenAI SDK; the texts kettle returns."""
    import openai

    client = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=120)
    texts = []
    for clip in clips:
        upload = (f"{clip.name.split()[0]}.wav", wav_bytes(clip.audio), "audio/wav")
        result = client.audio.transcriptions.create(model="whisper-1", file=upload)
        texts.append(result.text)
    return texts


def plain_model(name: str = MODEL) -> Any:
    from faster_whisper import WhisperModel
    from kettle.transcribe.model.models import resolve_model

    return WhisperModel(str(resolve_model(name)), device="cpu", compute_type="int8", cpu_threads=2)


def plain_all(model: Any, clips: Sequence[Clip]) -> list[str]:
    """Plain faster-whisper (beam 5, its defaults otherwise), one clip at a time."""
    texts = []
    for clip in clips:
        segments, _ = model.transcribe(clip.audio, beam_size=5)
        texts.append("".join(s.text for s in segments).strip())
    return texts


# --- scoring -----------------------------------------------------------------------------
def corpus_wer(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """Corpus WER after Whisper's English normalizer (clips with an empty reference are
    scored as insertions against the corpus)."""
    import jiwer

    refs = [" ".join(words_of(r)) for r in references]
    hyps = [" ".join(words_of(h)) for h in hypotheses]
    errors = sum(
        jiwer.process_words(r, h).wer * len(r.split()) if r else len(h.split())
        for r, h in zip(refs, hyps, strict=True)
    )
    total = sum(len(r.split()) for r in refs)
    return float(errors / total) if total else 0.0


def token_loops(text: str) -> list[str]:
    """Runs of one token 3+ times back to back ("s s s s") in ``text``."""
    toks = words_of(text)
    loops = []
    i = 0
    while i < len(toks):
        j = i
        while j < len(toks) and toks[j] == toks[i]:
            j += 1
        if j - i >= 3:
            loops.append(" ".join(toks[i:j]))
        i = j
    return loops


def group_result(clips: Sequence[Clip], kettle: Sequence[str], plain: Sequence[str]) -> dict:
    refs = [c.reference for c in clips]
    return {
        "clips": len(clips),
        "audio_s": round(sum(c.seconds for c in clips), 2),
        "kettle_wer": round(100 * corpus_wer(refs, kettle), 2),
        "plain_wer": round(100 * corpus_wer(refs, plain), 2),
        "kettle_loops": sum(len(token_loops(t)) for t in kettle),
        "plain_loops": sum(len(token_loops(t)) for t in plain),
        "per_clip": [
            {
                "clip": c.name,
                "seconds": round(c.seconds, 2),
                "reference": c.reference,
                "kettle": k,
                "plain": p,
            }
            for c, k, p in zip(clips, kettle, plain, strict=True)
        ],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--eval-dir", type=Path, default=None, help="default: $KETTLE_EVAL_DIR")
    p.add_argument("--no-write", action="store_true", help="do not rewrite RESULTS.md")
    args = p.parse_args(argv)
    path = eval_dir(args.eval_dir)
    data_line = require_eval_set(path)
    model = plain_model()
    groups = {"commands": command_clips(path), "jfk_fragments": jfk_fragments(model)}
    started = time.perf_counter()
    os.environ["KETTLE_API_KEYS"] = KEY  # (the server reads it; --api-key would show in ps)
    with kettle_serving([]) as (_, base):
        kettle = {g: post_all(base, clips) for g, clips in groups.items()}
    plain = {g: plain_all(model, clips) for g, clips in groups.items()}
    results = {g: group_result(groups[g], kettle[g], plain[g]) for g in groups}
    info = machine_info()
    result = {
        "machine": info,
        "data": data_line,
        "model": MODEL,
        "seconds": round(time.perf_counter() - started, 1),
        "groups": results,
    }
    rows = [
        {"group": g, **{k: v for k, v in r.items() if k != "per_clip"}} for g, r in results.items()
    ]
    columns = [
        "group", "clips", "audio_s", "kettle_wer", "plain_wer", "kettle_loops", "plain_loops",
    ]  # fmt: skip
    table = markdown_table(rows, columns)
    clips_table = markdown_table(clip_rows(results), ["clip", "reference", "kettle", "plain"])
    print(json.dumps(result, indent=2))
    print(table)
    print(clips_table)
    Path(__file__).with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    if not args.no_write:
        write_section(SECTION, section_body(data_line, clips_table))
    return 0


def clip_rows(results: dict[str, dict[str, Any]]) -> list[dict[str, object]]:
    """Each clip's reference and two texts, then its group's WER and loops."""
    rows: list[dict[str, object]] = []
    for group, r in results.items():
        rows += [{k: c[k] for k in ("clip", "reference", "kettle", "plain")} for c in r["per_clip"]]
        rows.append(
            {
                "clip": f"**{group}**",
                "reference": "WER, loops",
                "kettle": f"**{r['kettle_wer']:.1f} %**, {r['kettle_loops']}",
                "plain": f"**{r['plain_wer']:.1f} %**, {r['plain_loops']}",
            }
        )
    return rows


def section_body(data_line: str, clips_table: str) -> str:
    # The section stays under 25 lines: one line of prose and the clips' table.
    return (
        f"{data_line}. Each clip posted alone as 16 kHz WAV with the OpenAI SDK to `kettle "
        "serve` (defaults, tiny.en) vs plain faster-whisper (int8, 2 threads, beam 5); "
        "commands: the six `command_short` clips; jfk: jfk.flac after 1 s of silence, cut as "
        "Pipecat's OpenAISTTService posts it (Silero 0.7, stop 0.2 s). WER over each group; "
        "loops: a token 3+ times back to back. Whisper's normalizer reads FIVE FIVE as 55 (2 "
        "word errors on both paths). See the script's docstring.\n\n" + clips_table
    )


if __name__ == "__main__":
    raise SystemExit(main())
