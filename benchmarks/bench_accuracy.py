"""Live accuracy: kettle's streaming finals against offline decoding of the same audio.

Sets, built here:

- (a) conversations: eval clips of real voices joined with 0.6-2 s gaps, in several orders;
- (b) espeak-ng renderings of the sentences below, 2 voices x 2 speeds, as conversations;
- (c) the eval clips one by one;
- (n) generated non-speech (white, pink and babble noise, tones, chords, silence): no words.

Methods, on the same model, in one run (interleaved per conversation):

- ``stream``: kettle's streaming finals (SessionConfig defaults: finals in context);
- ``alone``: the per-utterance path (each utterance decoded alone, 0.2 s after the last
  voiced frame, every agreed word stable, every window encoded on 30 s), i.e. what the
  session did before;
- ``transcribe``: ``kettle transcribe``'s file pipeline on the whole file;
- ``offline``: faster-whisper ``WhisperModel.transcribe`` (beam 5, its defaults, whole file),
  the anchor.

For WER and CPU, streaming runs drive the session directly and decode each request as it
is asked for, at the audio position a real-time stream on an idle server would ask for it:
the same requests every run, so CPU differences are the methods' own (the engine's
load-dependent partial cadence is left out). The final lag from the end of speech
(P50/P95) comes from real-time runs through the engine (``run_simulation``) of the first
conversation of set (a), or of the first ``--lag-items`` pooled (methods interleaved). WER
is after Whisper's English normaliser; CPU is this process's CPU seconds per audio second.
Also reported: the share of final words that were stable in a
partial before, and the accuracy of those words (aligned to the reference).

    python benchmarks/bench_accuracy.py           # short run (a few minutes on 2 cores)
    python benchmarks/bench_accuracy.py --full    # 3 orders, 4 renderings, all clips, 10 min noise

``--served`` (``--served-streams 1,3``) adds real-time runs through a `kettle serve`
subprocess, as the browser page streams, beside the decode-at-once columns (_served.py);
they write bench_accuracy_served.json and its own RESULTS.md section, not this script's.

Writes benchmarks/bench_accuracy.json, benchmarks/accuracy.png and its RESULTS.md section.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import dataclasses
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _served  # noqa: E402
from _results import machine_info, markdown_table, write_section  # noqa: E402

SR = 16000
SENTENCES = [
    "Remind me to order the tomato plants before the weekend.",
    "The meeting moved to Thursday at half past two.",
    "Can you send the slides to everyone on the team?",
    "We should test the new heater in the garage first.",
    "My sister bought a blue bicycle with a small basket.",
    "Please turn the music down while I am on the phone.",
    "The train to the airport leaves every twenty minutes.",
    "I think the library closes early on public holidays.",
    "Add milk, eggs and two loaves of bread to the list.",
    "The children painted a large map of the river valley.",
]
# Set (m), held out from the sentences above: a meeting's turns, one voice, 0.8-2 s pauses.
MEETING = [
    "Please remind me to water the tomato plants before the weekend starts.",
    "The train leaves from platform seven at half past eight.",
    "Could you book a table for four at the Italian place on Friday?",
    "I left the spare keys with our neighbour across the street.",
    "The quarterly report needs two more charts and a short summary.",
    "Let's move the design review to Wednesday afternoon.",
    "My flight lands at nine, so I will call you from the taxi.",
    "Don't forget that the office is closed on Monday.",
]
MEETING_VOICES = [("en-us", 160), ("en-gb", 190)]
VOICES = [("en-us", 165), ("en-gb", 200), ("en-gb-x-rp", 145), ("en-us+f3", 185)]
REAL_VOICES = {
    "librispeech", "librivox", "fleurs", "arctic_accent", "vctk_accent", "speech_pd",
    "ami_meeting", "ljspeech",
}  # fmt: skip


def eval_dir() -> Path:
    env = os.environ.get("KETTLE_EVAL_DIR")
    return Path(env) if env else HERE.parent.parent / "shared" / "eval"


@dataclasses.dataclass
class Item:
    """One recording of a set: audio, reference, and where each clip's speech lies."""

    name: str
    audio: np.ndarray
    reference: str

    @property
    def seconds(self) -> float:
        return len(self.audio) / SR


# --- building the sets ---------------------------------------------------------------------
def load_eval(path: Path) -> list[tuple[str, np.ndarray, str, str]]:
    from kettle.transcribe.audio.read import RawFormat, load_audio

    out = []
    with open(path / "manifest.tsv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            f = path / row["file"]
            raw = RawFormat.parse("s16le:16000:1") if f.suffix == ".raw" else None
            out.append((f.name, load_audio(f, raw=raw), row["reference_text"], row["category"]))
    return out


def join(
    name: str,
    parts: Sequence[tuple[np.ndarray, str]],
    seed: int,
    gaps: tuple[float, float] = (0.6, 2.0),
) -> Item:
    """Clips joined with 0.6-2 s of silence (``gaps``), 0.5 s before and 1.5 s after."""
    rng = np.random.default_rng(seed)
    pieces = [np.zeros(SR // 2, np.float32)]
    for i, (audio, _) in enumerate(parts):
        if i:
            pieces.append(np.zeros(int(rng.uniform(*gaps) * SR), np.float32))
        pieces.append(audio.astype(np.float32))
    pieces.append(np.zeros(int(1.5 * SR), np.float32))
    return Item(name, np.concatenate(pieces), " ".join(ref for _, ref in parts))


def set_a(clips: list[tuple[str, np.ndarray, str, str]], orders: int, n: int) -> list[Item]:
    real = pick_mixed([c for c in clips if c[3] in REAL_VOICES and 2.0 <= len(c[1]) / SR <= 9.0], n)
    items = []
    for k in range(orders):
        order = list(range(len(real)))
        np.random.default_rng(100 + k).shuffle(order)
        items.append(join(f"a{k}", [(real[i][1], real[i][2]) for i in order], seed=k))
    return items


def pick_mixed(
    clips: list[tuple[str, np.ndarray, str, str]], n: int
) -> list[tuple[str, np.ndarray, str, str]]:
    """Up to n clips, taken round-robin over their categories (many voices, not one book)."""
    by_cat: dict[str, list[tuple[str, np.ndarray, str, str]]] = {}
    for c in clips:
        by_cat.setdefault(c[3], []).append(c)
    out: list[tuple[str, np.ndarray, str, str]] = []
    while len(out) < n and any(by_cat.values()):
        for cat in sorted(by_cat):
            if by_cat[cat] and len(out) < n:
                out.append(by_cat[cat].pop(0))
    return out


def espeak(text: str, voice: str, speed: int) -> np.ndarray:
    from kettle.transcribe.audio.read import load_audio

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "say.wav"  # a file: --stdout leaves the WAV header's size unset
        subprocess.run(
            ["espeak-ng", "-v", voice, "-s", str(speed), "-w", str(path), text],
            capture_output=True,
            check=True,
        )
        return load_audio(path)


def set_b(renderings: int) -> list[Item]:
    items = []
    for k, (voice, speed) in enumerate(VOICES[:renderings]):
        parts = [(espeak(s, voice, speed), s) for s in SENTENCES]
        items.append(join(f"b-{voice}-{speed}", parts, seed=10 + k))
    return items


def set_m() -> list[Item]:
    """Meetings: the MEETING sentences in one voice each, 0.8-2 s pauses (issue 24)."""
    items = []
    for k, (voice, speed) in enumerate(MEETING_VOICES):
        parts = [(espeak(s, voice, speed), s) for s in MEETING]
        items.append(join(f"m-{voice}-{speed}", parts, seed=20 + k, gaps=(0.8, 2.0)))
    return items


def set_c(clips: list[tuple[str, np.ndarray, str, str]], n: int | None) -> list[Item]:
    usable = [c for c in clips if len(c[1]) / SR <= 30.0]
    chosen = usable if n is None else usable[:: max(1, len(usable) // n)][:n]
    return [join(f"c-{name}", [(audio, ref)], seed=0) for name, audio, ref, _ in chosen]


def set_n(minutes: float, clips: list[tuple[str, np.ndarray, str, str]]) -> list[Item]:
    """Non-speech, in 30 s recordings: noises, tones, chords, silence, reversed-speech babble."""
    rng = np.random.default_rng(7)
    n = 30 * SR
    t = np.arange(n) / SR
    speech = np.concatenate([c[1] for c in clips if c[3] in REAL_VOICES][:20])

    def pink() -> np.ndarray:
        spectrum = np.fft.rfft(rng.standard_normal(n))
        f = np.arange(spectrum.shape[0], dtype=np.float64)
        f[0] = 1.0
        return np.fft.irfft(spectrum / np.sqrt(f), n)

    def babble() -> np.ndarray:
        out = np.zeros(n)
        for _ in range(6):  # six talkers, reversed, at random offsets
            start = int(rng.integers(0, len(speech) - n))
            out += speech[start : start + n][::-1]
        return out

    makers: list[tuple[str, Callable[[], np.ndarray]]] = [
        ("white", lambda: rng.standard_normal(n)),
        ("pink", pink),
        ("babble", babble),
        ("tone", lambda: np.sin(2 * np.pi * 440 * t)),
        ("chord", lambda: np.sin(2 * np.pi * np.outer((261.6, 329.6, 392.0), t)).sum(axis=0)),
        ("silence", lambda: np.zeros(n)),
    ]
    items = []
    for k in range(max(1, round(minutes * 2))):
        kind, make = makers[k % len(makers)]
        x = make()
        peak = float(np.max(np.abs(x))) or 1.0
        level = 0.0 if kind == "silence" else float(rng.choice([0.05, 0.2, 0.5]))
        items.append(Item(f"n-{kind}-{k}", (level * x / peak).astype(np.float32), ""))
    return items


# --- methods -------------------------------------------------------------------------------
@dataclasses.dataclass
class Outcome:
    text: str
    cpu_s: float
    lag_p50: float | None = None
    lag_p95: float | None = None
    finals: list[tuple[str, int]] = dataclasses.field(default_factory=list)  # (text, n stable)
    cache_hit_rate: float | None = None
    lags: list[float] = dataclasses.field(default_factory=list)  # from the end of speech, s
    # With revisions: the live finals' own text, each revision (final number, new text), and
    # each revision's delay from its final's end (audio seconds; wall seconds in real time).
    live_text: str | None = None
    revisions: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    revision_delays: list[float] = dataclasses.field(default_factory=list)
    first_delays: list[float] = dataclasses.field(default_factory=list)  # first pass's only


ALONE = {
    "context_s": "0",
    "final_tail_ms": "200",
    "stable_holdback": "0",
    "partial_encode_s": "30",
    "final_encode_s": "30",
    "stable_agree": "2",
    "partial_beam_size": "1",
    "final_beam_size": "5",
}


def parse_variant(method: str) -> tuple[dict[str, str], str | None]:
    """A streaming method's SessionConfig changes and its finals' model (None: the run's).

    ``stream`` is the defaults; ``alone`` the per-utterance path; either may carry
    ``:field=value`` changes (``stream:context_chars=150:final_tail_ms=200``), and
    ``:final_model=base`` decodes its finals with another model (the cascade)."""
    name, *changes = method.split(":")
    if name not in ("stream", "alone", "refined"):
        raise SystemExit(f"unknown streaming method {method!r}")
    fields = dict(ALONE) if name == "alone" else {}
    if name == "refined":
        fields["revisions"] = "true"
    for kv in changes:
        key, _, value = kv.partition("=")
        fields[key] = value
    final_model = fields.pop("final_model", None)
    fields.pop("refine_model", None)
    return fields, final_model


def refine_model_of(method: str) -> str | None:
    """``refined:refine_model=base`` refines with base; None: the finals' model."""
    for kv in method.split(":")[1:]:
        key, _, value = kv.partition("=")
        if key == "refine_model":
            return value
    return None


def stream_config(method: str) -> Any:
    from kettle.streaming.core.session import SessionConfig

    fields = parse_variant(method)[0]
    defaults = SessionConfig()
    typed: dict[str, Any] = {}
    for key, value in fields.items():
        default = getattr(defaults, key)
        if default is None or value.lower() == "none":  # an optional number, or "none"
            number = int if value.lstrip("-").isdigit() else float  # stable_agree_first=2
            typed[key] = None if value.lower() == "none" else number(value)
            continue
        kind = type(default)
        typed[key] = value.lower() in ("1", "true", "yes") if kind is bool else kind(value)
    return SessionConfig(**typed)


async def _stream(
    decoder: Any,
    final_decoder: Any,
    item: Item,
    variant: str,
    realtime: bool,
    refine_decoder: Any = None,
) -> Outcome:
    from kettle.streaming.cli.simulation import Clip, run_simulation
    from kettle.streaming.core.events import Final, Partial
    from kettle.streaming.engine.engine import Engine

    cpu0 = time.process_time()
    engine = Engine(decoder, final_decoder=final_decoder, refine_decoder=refine_decoder)
    async with engine:
        result = await run_simulation(
            engine,
            [[Clip(item.name, item.audio, item.reference)]],
            realtime=realtime,
            config=stream_config(variant),
        )
    cpu = time.process_time() - cpu0
    (log,) = result.logs
    stable: dict[int, int] = {}
    finals = []
    for _, event in log.events:
        if isinstance(event, Partial):
            stable[event.utterance] = len(event.stable.split())
        elif isinstance(event, Final):
            finals.append((event.text, stable.pop(event.utterance, 0)))
    lag = result.summary["final_lag_from_speech_end_s"]
    return Outcome(
        log.refined_hypothesis(),
        cpu,
        lag["p50"],
        lag["p95"],
        finals,
        result.summary["encoder_cache_hit_rate"],
        log.final_lags()[1],
        live_text=log.hypothesis(),
        revision_delays=log.revision_delays(),
    )


def run_stream(
    decoder: Any,
    final_decoder: Any,
    item: Item,
    variant: str,
    realtime: bool,
    refine_decoder: Any = None,
) -> Outcome:
    return asyncio.run(_stream(decoder, final_decoder, item, variant, realtime, refine_decoder))


_SESSION_IDS = itertools.count()


def run_session(
    decoder: Any, final_decoder: Any, item: Item, variant: str, refine_decoder: Any = None
) -> Outcome:
    """The session alone, each request decoded at once (finals by ``final_decoder`` if set,
    refinements by ``refine_decoder``, else the finals'), audio fed in 20 ms chunks."""
    from kettle.streaming.core.events import Final, Partial, Revision
    from kettle.streaming.core.session import Session
    from kettle.transcribe.types import DecodeKind

    # A fresh id per run: the adapter keeps incremental log-mel states by stream key
    # (session id, utterance), and a state whose head and old end match (both silence) would
    # be carried over from another run's window.
    session = Session(stream_config(variant), session_id=f"bench-{next(_SESSION_IDS)}")
    stable: dict[int, int] = {}
    finals: list[tuple[str, int]] = []
    ends: dict[int, int] = {}
    revisions: list[tuple[int, str]] = []
    delays: list[float] = []
    first: list[float] = []  # of the first pass's revisions

    def model_for(request: Any) -> Any:
        if request.refinement:
            return refine_decoder or final_decoder or decoder
        final = request.kind is DecodeKind.FINAL and final_decoder is not None
        return final_decoder if final else decoder

    def settle() -> None:
        while requests := session.poll_requests():
            for request in requests:
                (result,) = model_for(request).decode_batch([request])
                session.on_result(result)
        for event in session.poll_events():
            if isinstance(event, Partial):
                stable[event.utterance] = len(event.stable.split())
            elif isinstance(event, Final):
                finals.append((event.text, stable.pop(event.utterance, 0)))
                ends[event.utterance] = event.end
            elif isinstance(event, Revision):
                revisions.append((event.utterance, event.text))
                # Decoded at once: the delay is the audio it waited for (the lookahead).
                delay = (session.samples_fed - ends[event.utterance]) / SR
                delays.append(delay)
                if event.refinement == 1:
                    first.append(delay)

    decoder.clear_encoder_cache()  # no method reuses another's windows
    cache0 = decoder.cache_stats()
    cpu0 = time.process_time()
    for pos in range(0, len(item.audio), 320):
        session.feed_audio(item.audio[pos : pos + 320])
        settle()
    session.stop()
    settle()
    cpu = time.process_time() - cpu0
    cache1 = decoder.cache_stats()
    hits, misses = cache1.hits - cache0.hits, cache1.misses - cache0.misses
    live = " ".join(t for t, _ in finals)
    rate = hits / (hits + misses) if hits + misses else None
    return Outcome(
        apply_revisions(finals, revisions),
        cpu,
        finals=finals,
        cache_hit_rate=rate,
        live_text=live,
        revisions=revisions,
        revision_delays=delays,
        first_delays=first,
    )


def refinement_row(pairs: Sequence[tuple[Item, Outcome]], lag: Outcome | None) -> dict[str, Any]:
    """A refined method's extra columns: its live finals' WER, the share of finals revised,
    the revisions' effect, their delay (audio waited for; wall time in the real-time runs)."""
    from kettle.streaming.cli.simulation import latency_stats

    better = worse = same = 0
    for item, o in pairs:
        b, w, k = revision_effects(item.reference, o)
        better, worse, same = better + b, worse + w, same + k
    finals = sum(len(o.finals) for _, o in pairs)
    delays = latency_stats([d for _, o in pairs for d in o.revision_delays])
    row: dict[str, Any] = {
        "live_wer": wer([(item.reference, o.live_text or "") for item, o in pairs]),
        "revised": f"{better + worse + same}/{finals}",
        "better_worse_same": f"{better}/{worse}/{same}",
        "delay_audio_p50": delays["p50"],
        "delay_audio_p95": delays["p95"],
        "first_delay_p50": latency_stats([d for _, o in pairs for d in o.first_delays])["p50"],
    }
    if lag is not None:
        wall = latency_stats(lag.revision_delays)
        row["delay_rt_p50"], row["delay_rt_p95"] = wall["p50"], wall["p95"]
    return row


def apply_revisions(finals: Sequence[tuple[str, int]], revisions: Sequence[tuple[int, str]]) -> str:
    texts = [t for t, _ in finals]
    for number, text in revisions:
        texts[number] = text
    return " ".join(texts)


def revision_effects(reference: str, o: Outcome) -> tuple[int, int, int]:
    """How many of the run's revisions made the transcript better, worse or no different
    against the reference (each applied alone to the live finals)."""
    base = wer([(reference, o.live_text or "")]) or 0.0
    better = worse = same = 0
    for revision in o.revisions:
        score = wer([(reference, apply_revisions(o.finals, [revision]))]) or 0.0
        better += score < base - 1e-9
        worse += score > base + 1e-9
        same += abs(score - base) <= 1e-9
    return better, worse, same


def run_transcribe(decoder: Any, item: Item) -> Outcome:
    from kettle.transcribe.files.pipeline import transcribe_audio

    cpu0 = time.process_time()
    text = transcribe_audio(item.audio, decoder).text
    return Outcome(text, time.process_time() - cpu0)


def run_offline(model: Any, item: Item) -> Outcome:
    cpu0 = time.process_time()
    segments, _ = model.transcribe(item.audio, beam_size=5)
    text = " ".join(s.text.strip() for s in segments)
    return Outcome(text, time.process_time() - cpu0)


class Models:
    """Adapters and faster-whisper anchors, loaded once each, on first use."""

    def __init__(self, threads: int) -> None:
        self._threads = threads
        self._adapters: dict[str, Any] = {}
        self._anchors: dict[str, Any] = {}

    def adapter(self, name: str) -> Any:
        from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter

        if name not in self._adapters:
            self._adapters[name] = WhisperAdapter(ModelConfig(name=name, threads=self._threads))
        return self._adapters[name]

    def anchor(self, name: str) -> Any:
        from kettle.transcribe.model import fw

        if name not in self._anchors:
            self._anchors[name] = fw.load_whisper(
                str(self.adapter(name).path), device="cpu", compute_type="int8",
                threads=self._threads,
            )  # fmt: skip
        return self._anchors[name]


# --- scoring -------------------------------------------------------------------------------
def wer(pairs: Sequence[tuple[str, str]]) -> float | None:
    from kettle.streaming.cli.simulation import corpus_wer

    return corpus_wer(pairs)


def stable_accuracy(reference: str, finals: Sequence[tuple[str, int]]) -> tuple[int, int, int]:
    """(final words, words that were stable before the final, stable words that match the
    reference word they align to), words compared as docs/protocol.md normalises them."""
    from kettle.streaming.core.agreement import normalized, split_words

    hyp: list[str] = []
    stable: list[bool] = []
    for text, n in finals:
        words = normalized(split_words(text))
        hyp += words
        stable += [i < n for i in range(len(words))]
    ref = normalized(split_words(reference))
    correct = aligned_correct(ref, hyp)
    return (
        len(hyp),
        sum(stable),
        sum(1 for ok, st in zip(correct, stable, strict=True) if ok and st),
    )


def aligned_correct(ref: list[str], hyp: list[str]) -> list[bool]:
    """For each hypothesis word: does a minimum-edit alignment match it to an equal word."""
    n, m = len(ref), len(hyp)
    d = np.zeros((n + 1, m + 1), dtype=np.int32)
    d[:, 0] = np.arange(n + 1)
    d[0, :] = np.arange(m + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i, j] = min(
                d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + (ref[i - 1] != hyp[j - 1])
            )
    ok = [False] * m
    i, j = n, m
    while i > 0 and j > 0:
        if d[i, j] == d[i - 1, j - 1] + (ref[i - 1] != hyp[j - 1]):
            ok[j - 1] = ref[i - 1] == hyp[j - 1]
            i, j = i - 1, j - 1
        elif d[i, j] == d[i, j - 1] + 1:
            j -= 1
        else:
            i -= 1
    return ok


# --- the run -------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the issue's full sets")
    parser.add_argument("--sets", default="a,b,c,m,n", help="which sets (a,b,c,m,n)")
    parser.add_argument(
        "--methods",
        default="stream,alone,transcribe,offline",
        help="comma-separated: stream[:field=value...][:final_model=M], alone[:...], "
        "transcribe, offline[:model]",
    )
    parser.add_argument("--orders", type=int, default=None, help="set (a) orders (1; full 3)")
    parser.add_argument("--clips", type=int, default=10, help="clips per conversation in (a)")
    parser.add_argument("--renderings", type=int, default=None, help="set (b) (2; full 4)")
    parser.add_argument("--singles", type=int, default=None, help="set (c) clips (12; full all)")
    parser.add_argument("--noise-minutes", type=float, default=None, help="set (n) (1; full 10)")
    parser.add_argument("--no-realtime", action="store_true", help="skip the lag runs")
    parser.add_argument(
        "--lag-methods", default=None, help="streaming methods with a lag run (default: all)"
    )
    parser.add_argument(
        "--lag-items",
        type=int,
        default=1,
        help="real-time lag runs on the first N conversations of set (a), pooled",
    )
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--final-model", default=None, help="e.g. base: the cascade")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "bench_accuracy.json")
    parser.add_argument("--plot", type=Path, default=HERE / "accuracy.png")
    parser.add_argument("--no-write", action="store_true", help="do not touch RESULTS.md")
    parser.add_argument(
        "--section",
        default="bench_accuracy",
        help="RESULTS.md section to write (runs split by set write one each)",
    )
    parser.add_argument("--items", type=int, default=None, help="only each set's first N items")
    parser.add_argument("--quick", action="store_true", help="--items 1: a smoke test")
    _served.add_arguments(parser)
    args = parser.parse_args(argv)
    full = args.full
    orders = args.orders or (3 if full else 1)
    renderings = args.renderings or (4 if full else 2)
    singles = args.singles if args.singles is not None else (None if full else 12)
    noise_minutes = args.noise_minutes or (10.0 if full else 1.0)
    methods = [m for m in args.methods.split(",") if m]
    wanted = set(args.sets.split(","))

    t0 = time.monotonic()
    load0 = os.getloadavg()
    models = Models(args.threads)
    run_final = args.final_model or args.model
    clips = load_eval(eval_dir())
    sets: dict[str, list[Item]] = {}
    if "a" in wanted:
        sets["a"] = set_a(clips, orders, args.clips)
    if "b" in wanted:
        sets["b"] = set_b(renderings)
    if "c" in wanted:
        sets["c"] = set_c(clips, singles)
    if "m" in wanted:
        sets["m"] = set_m()
    if "n" in wanted:
        sets["n"] = set_n(noise_minutes, clips)
    if args.items or args.quick:
        sets = {name: items[: args.items or 1] for name, items in sets.items()}

    def refiner(method: str) -> Any:
        name = refine_model_of(method)
        return None if name is None else models.adapter(name)

    def stream(item: Item, method: str, realtime: bool) -> Outcome:
        final_model = parse_variant(method)[1] or run_final
        final = None if final_model == args.model else models.adapter(final_model)
        model = models.adapter(args.model)
        return run_stream(model, final, item, method, realtime, refiner(method))

    outcomes: dict[tuple[str, str], list[tuple[Item, Outcome]]] = {}
    for name, items in sets.items():
        for item in items:
            for method in methods:
                if name == "n" and method.startswith("alone"):
                    continue
                if method == "transcribe":
                    out = run_transcribe(models.adapter(run_final), item)
                elif method.startswith("offline"):
                    _, _, model = method.partition(":")
                    out = run_offline(models.anchor(model or run_final), item)
                else:
                    final_model = parse_variant(method)[1] or run_final
                    final = None if final_model == args.model else models.adapter(final_model)
                    model = models.adapter(args.model)
                    out = run_session(model, final, item, method, refiner(method))
                outcomes.setdefault((name, method), []).append((item, out))
                score = "" if name == "n" else f", wer {wer([(item.reference, out.text)])}"
                print(f"[{name}] {item.name} {method}: cpu {out.cpu_s:.1f} s{score}", flush=True)

    from kettle.streaming.cli.simulation import latency_stats

    lags: dict[str, Outcome] = {}
    if not args.no_realtime and "a" in sets:
        streaming = [m for m in methods if m.startswith(("stream", "alone", "refined"))]
        chosen = streaming if args.lag_methods is None else args.lag_methods.split(",")
        pooled: dict[str, list[float]] = {method: [] for method in chosen}
        delays: dict[str, list[float]] = {method: [] for method in chosen}
        # Methods interleaved per conversation, so a drift in the machine's speed spreads
        # over all of them.
        for item in sets["a"][: args.lag_items]:
            for method in chosen:
                run = stream(item, method, realtime=True)
                pooled[method] += run.lags
                delays[method] += run.revision_delays
        for method, values in pooled.items():
            stats = latency_stats(values)
            lags[method] = Outcome(
                "", 0.0, stats["p50"], stats["p95"], lags=values, revision_delays=delays[method]
            )
            print(
                f"[lag] {method}: p50 {lags[method].lag_p50} p95 {lags[method].lag_p95}"
                f" ({len(values)} finals)",
                flush=True,
            )

    rows = []
    for (name, method), pairs in outcomes.items():
        audio_s = sum(item.seconds for item, _ in pairs)
        row: dict[str, Any] = {
            "set": name,
            "method": method,
            "items": len(pairs),
            "audio_s": round(audio_s, 1),
            "cpu_per_audio_s": round(sum(o.cpu_s for _, o in pairs) / audio_s, 3),
        }
        if name == "n":
            row["words"] = sum(len(o.text.split()) for _, o in pairs)
        else:
            row["wer"] = wer([(item.reference, o.text) for item, o in pairs])
        if method in lags:
            row["lag_p50"] = lags[method].lag_p50 if name == "a" else None
            row["lag_p95"] = lags[method].lag_p95 if name == "a" else None
        if method.startswith("refined") and name != "n":
            row.update(refinement_row(pairs, lags.get(method) if name == "a" else None))
        if method.startswith(("stream", "alone")) and name != "n":
            words = stable_n = stable_ok = 0
            for item, o in pairs:
                w, s, k = stable_accuracy(item.reference, o.finals)
                words, stable_n, stable_ok = words + w, stable_n + s, stable_ok + k
            row["stable_share"] = round(stable_n / words, 3) if words else None
            row["stable_accuracy"] = round(stable_ok / stable_n, 3) if stable_n else None
            hits = [o.cache_hit_rate for _, o in pairs if o.cache_hit_rate is not None]
            row["cache_hit_rate"] = round(float(np.mean(hits)), 3) if hits else None
        rows.append(row)
    if _served.wanted(args):  # the at-once rows go beside the served ones, not on their own
        return _served.run(args, sets, rows)
    total = time.monotonic() - t0
    load1 = os.getloadavg()
    result = {
        "machine": machine_info(),
        "load_avg_start_end": [round(load0[0], 1), round(load1[0], 1)],
        "model": args.model,
        "final_model": args.final_model or args.model,
        "full": full,
        "total_wall_s": round(total, 1),
        "rows": rows,
        "hypotheses": {
            f"{name}/{method}/{item.name}": o.text
            for (name, method), pairs in outcomes.items()
            for item, o in pairs
            if name != "n" or o.text
        },
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    columns = [
        "set", "method", "items", "audio_s", "wer", "live_wer", "words", "lag_p50", "lag_p95",
        "cpu_per_audio_s", "stable_share", "stable_accuracy", "cache_hit_rate", "revised",
        "better_worse_same", "delay_audio_p50", "delay_audio_p95", "first_delay_p50",
        "delay_rt_p50",
        "delay_rt_p95",
    ]  # fmt: skip
    percent = ("wer", "live_wer")
    table = markdown_table(
        [
            {k: (f"{v * 100:.1f} %" if k in percent and v is not None else v) for k, v in r.items()}
            for r in rows
        ],
        columns,
    )
    print(table)
    print(json.dumps({"rows": rows, "total_wall_s": round(total, 1)}))
    plot(rows, args.plot)
    if not args.no_write:
        write_section(
            args.section,
            f"Model {args.model}, finals by {args.final_model or args.model}; "
            f"load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end (2 cores, "
            f"shared with other jobs); {total:.0f} s wall.\n\n{table}\n"
            "`stream` is kettle's streaming finals (defaults), `alone` the per-utterance path "
            "it replaced, `transcribe` kettle's file pipeline, `offline` faster-whisper on the "
            "whole file (beam 5). WER after Whisper's English normaliser; lag is the final's "
            "lag from the end of speech in real-time runs of the first "
            f"{args.lag_items} (a) conversation(s), pooled; "
            "`words` counts words emitted on non-speech; `stable_share` is the share of final "
            "words that were stable in a partial before, `stable_accuracy` how many of those "
            "match the reference. `refined` is `stream` with revisions (the refinement "
            "pass): its `wer` is the transcript with revisions applied, `live_wer` its own "
            "run's live finals; `revised` counts finals revised; `better_worse_same` judges "
            "each revision applied alone against the reference; `delay_audio_*` is the audio "
            "after a final's end when its revision came (decoded at once), `first_delay_p50` "
            "the first pass's; `delay_rt_*` are wall seconds in the real-time runs.\n\n"
            f"![accuracy]({args.plot.name})\n",
        )
    return 0


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scored = [r for r in rows if r.get("wer") is not None]
    sets = sorted({r["set"] for r in scored})
    methods = list(dict.fromkeys(r["method"] for r in scored))
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(1, len(methods))
    for k, method in enumerate(methods):
        vals = [
            next((r["wer"] * 100 for r in scored if r["set"] == s and r["method"] == method), 0)
            for s in sets
        ]
        ax.bar([i + k * width for i in range(len(sets))], vals, width, label=method)
    ax.set_xticks([i + width * (len(methods) - 1) / 2 for i in range(len(sets))])
    ax.set_xticklabels([f"set {s}" for s in sets])
    ax.set_ylabel("WER %")
    ax.set_title("streaming finals vs offline decoding, same model")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
