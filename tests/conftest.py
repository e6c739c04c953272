"""Shared fixtures: the real speech the tests carry, its manifest, WER, espeak-ng, tiny.en.

Real speech: `tests/data/speech` (24 openly licensed clips in every format the product reads,
see its README). `KETTLE_EVAL_DIR` points the same fixtures at the larger eval set instead
(same layout and file names). No test reads a path outside the repository otherwise.

Also `pcm16` and `mulaw` (float samples as the bytes a client sends), and `serve_replica`:
`kettle serve --fake-model` replicas as real processes on loopback (client and load-balancer
tests).
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import settings

# A fixed seed in the quick suite and CI; `--hypothesis-profile deep` for a long local search.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("deep", max_examples=2000, deadline=None, print_blob=True)
settings.load_profile("ci")

if TYPE_CHECKING:
    from kettle.transcribe.model.adapter import WhisperAdapter
    from kettle.transcribe.types import DecodeRequest, DecodeResult

REPO_ROOT = Path(__file__).resolve().parents[1]
SPEECH_DIR = REPO_ROOT / "tests" / "data" / "speech"
SAMPLE_RATE = 16000


@pytest.fixture(scope="session", autouse=True)
def own_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every test (and every `kettle serve` it starts) keeps kettle's cache in a folder of the
    test session's own: a loaded test run must not leave the user's cost profile or
    transcripts behind (one stored a decoder step 35x too slow in ~/.cache/kettle)."""
    folder = tmp_path_factory.mktemp("kettle-cache")
    old = os.environ.get("KETTLE_CACHE_DIR")
    os.environ["KETTLE_CACHE_DIR"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("KETTLE_CACHE_DIR", None)
    else:
        os.environ["KETTLE_CACHE_DIR"] = old


def _eval_dir() -> Path:
    env = os.environ.get("KETTLE_EVAL_DIR")
    return Path(env) if env else SPEECH_DIR


@dataclass(frozen=True)
class EvalClip:
    path: Path
    duration_s: float
    reference: str
    category: str
    sample_rate: int
    channels: int
    license: str
    source: str


@pytest.fixture(scope="session")
def eval_dir() -> Path:
    """The speech folder: tests/data/speech, or $KETTLE_EVAL_DIR when set."""
    path = _eval_dir()
    if not (path / "manifest.tsv").is_file():
        # A failure, not a skip: the repository carries this data, so its absence is a bug
        # (or a KETTLE_EVAL_DIR that points nowhere).
        pytest.fail(f"no speech manifest at {path / 'manifest.tsv'} (check KETTLE_EVAL_DIR)")
    return path


@pytest.fixture(scope="session")
def eval_clips(eval_dir: Path) -> list[EvalClip]:
    """Every clip of the manifest, in manifest order."""
    with open(eval_dir / "manifest.tsv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [
        EvalClip(
            path=eval_dir / row["file"],
            duration_s=float(row["duration_s"]),
            reference=row["reference_text"],
            category=row["category"],
            sample_rate=int(row["sample_rate_hz"]),
            channels=int(row["channels"]),
            license=row["license"],
            source=row["source_repo_and_path"],
        )
        for row in rows
    ]


@pytest.fixture(scope="session")
def eval_clip(eval_clips: list[EvalClip]) -> Callable[[str], EvalClip]:
    """eval_clip("ls__2830-3980-0043.wav") -> that clip; fails (never skips) when absent.

    Every file of tests/data/speech is also in the full eval set under the same name, so a
    test that names one runs on both.
    """
    by_name = {c.path.name: c for c in eval_clips}

    def find(name: str) -> EvalClip:
        clip = by_name.get(Path(name).name)
        if clip is None:
            pytest.fail(f"{name} is not in the speech manifest ({len(by_name)} clips)")
        return clip

    return find


def wer(references: list[str], hypotheses: list[str]) -> float:
    """Corpus WER after Whisper's English normalizer, as the eval README prescribes."""
    import jiwer
    from whisper_normalizer.english import EnglishTextNormalizer

    normalize = EnglishTextNormalizer()
    refs = [normalize(r) for r in references]
    hyps = [normalize(h) for h in hypotheses]
    return float(jiwer.wer(refs, hyps))


@pytest.fixture(scope="session")
def wer_fn() -> Callable[[list[str], list[str]], float]:
    return wer


# -- audio as bytes -------------------------------------------------------------------------


def pcm16(samples: np.ndarray) -> bytes:
    """Float samples as 16-bit little-endian PCM: clipped to [-1, 1], scaled by 32767 and
    truncated (the client's ``to_s16le`` rounds instead)."""
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


def mulaw(samples: np.ndarray) -> bytes:
    """G.711 u-law encoding of float samples in [-1, 1]."""
    pcm = np.clip(np.round(samples * 32767.0), -32768, 32767).astype(np.int32)
    sign = (pcm < 0).astype(np.int32)
    mag = np.minimum(np.abs(pcm), 32635) + 0x84
    exponent = np.floor(np.log2(mag)).astype(np.int32) - 7
    mantissa = (mag >> (exponent + 3)) & 0x0F
    return (~((sign << 7) | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8).tobytes()


# -- comparing two decodes of the same speech ---------------------------------------------
# The int8 model's float parts round differently with the CPU's vector width (AVX2 or
# AVX-512), the batch's shape and composition, and the feature path, so a token near a tie
# may flip between two decodes whose inputs differ by one float32 ulp. Two texts are compared
# exactly only where the model's inputs were bit-identical (same features, same batch, same
# options); otherwise they may differ by what one flipped token does to the words.

# Words one flipped token changes: a substitution, or a split or join ("flour fattened" /
# "flourfattened": two word edits). Punctuation ("down waiting" / "down, waiting") is none.
TOKEN_FLIP_WORD_EDITS = 2


def word_edits(a: str, b: str) -> int:
    """Word edit distance between two texts after Whisper's English normalizer."""
    from whisper_normalizer.english import EnglishTextNormalizer

    normalize = EnglishTextNormalizer()
    x, y = normalize(a).split(), normalize(b).split()
    prev = list(range(len(y) + 1))
    for i, wx in enumerate(x, 1):
        cur = [i] + [0] * len(y)
        for j, wy in enumerate(y, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (wx != wy))
        prev = cur
    return prev[-1]


class DecoderInputs:
    """A decoder that records, batch by batch, what the model was given, so a test can tell
    whether two runs fed it bit-identical inputs. Everything else is the wrapped decoder's.

    A batch is recorded as the tuple of its requests' model inputs (``model_inputs``), in
    order, and whether any result was sampled (a temperature above 0 draws random numbers, so
    equal inputs need not give equal text).
    """

    def __init__(self, decoder: object) -> None:
        self._decoder = decoder
        self.batches: list[tuple[tuple[object, ...], bool]] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._decoder, name)

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        results: list[DecodeResult] = self._decoder.decode_batch(requests)  # type: ignore[attr-defined]
        sampled = any(r.temperature > 0 for r in results)
        multilingual = bool(getattr(self._decoder, "multilingual", True))
        self.batches.append((tuple(model_inputs(r, multilingual) for r in requests), sampled))
        return results

    def mark(self) -> int:
        """A position in the record: ``since(mark)`` is what came after it."""
        return len(self.batches)

    def since(self, mark: int) -> list[tuple[tuple[object, ...], bool]]:
        return self.batches[mark:]


def model_inputs(r: DecodeRequest, multilingual: bool = True) -> tuple[object, ...]:
    """What of a request reaches the model's text: the samples and every decoding option.

    Left out: ids and cache keys (names only), the engine's routing flags, and
    ``word_timestamps`` (words are aligned after the text is chosen); the language on an
    English-only model, which decodes English whatever a request says. A stream key counts
    for partials, which it moves to the incremental log-mel path.
    """
    from kettle.transcribe.types import DecodeKind

    audio = np.ascontiguousarray(r.audio)
    return (
        audio.dtype.str,
        audio.shape,
        hashlib.sha256(audio.tobytes()).hexdigest(),
        r.kind,
        r.prompt,
        r.prefix,
        r.context,
        r.hotwords,
        r.language if multilingual else "en",
        r.languages if multilingual else (),
        r.beam_size,
        r.max_new_tokens,
        r.fallback_round,
        r.task,
        r.encode_min_s,
        r.kind is DecodeKind.PARTIAL and r.stream_key is not None,
    )


def require_tool(command: str, apt_package: str) -> str:
    """The path of `command`; the test fails, naming the apt package, when it is missing."""
    path = shutil.which(command)
    if path is None:
        pytest.fail(f"{command} is not installed: apt-get install {apt_package} (.ci/run does)")
    return path


@pytest.fixture(scope="session")
def espeak(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., np.ndarray]:
    """espeak(text, *args) -> 16 kHz mono float32 speech synthesized by espeak-ng.

    `args` go to espeak-ng as they are (e.g. "-s", "140" for the speed, "-v", "en-us").
    Fails, naming the apt package, when espeak-ng is missing.
    """
    import soundfile as sf
    import soxr

    binary = require_tool("espeak-ng", "espeak-ng")
    folder = tmp_path_factory.mktemp("espeak")
    made = [0]

    def synthesize(text: str, *args: str) -> np.ndarray:
        made[0] += 1
        wav = folder / f"{made[0]}.wav"
        subprocess.run([binary, *args, "-w", str(wav), text], check=True, capture_output=True)
        data, rate = sf.read(wav, dtype="float32", always_2d=True)
        mono = data.mean(axis=1)
        return np.asarray(soxr.resample(mono, rate, SAMPLE_RATE), dtype=np.float32)

    return synthesize


@pytest.fixture(scope="session")
def tiny_decoder() -> WhisperAdapter:
    """The real tiny.en adapter (int8, 2 threads), loaded once per test session."""
    from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter

    return WhisperAdapter(ModelConfig(name="tiny.en", threads=2))


# -- kettle serve replicas ---------------------------------------------------------------

_READY = re.compile(r"kettle serving on (http://127\.0\.0\.1:(\d+))\n")
START_TIMEOUT_S = 120.0  # a deadlock guard on a loaded machine, not a speed requirement


class Replica:
    """One `kettle serve --fake-model` process; ``restart`` brings it back on the same port."""

    def __init__(self, log_dir: Path, name: str, args: tuple[str, ...]) -> None:
        self.log_dir = log_dir
        self.name = name
        self.args = args
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/stream"

    def start(self) -> Replica:
        self.starts += 1
        log = open(self.log_dir / f"{self.name}.{self.starts}.log", "w")  # noqa: SIM115
        cmd = [sys.executable, "-m", "kettle.streaming.cli.main", "serve", "--fake-model"]
        cmd += ["--port", str(self.port), *self.args]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=dict(os.environ)
        )
        log.close()
        line = _first_line(self.proc, START_TIMEOUT_S)
        match = _READY.fullmatch(line)
        assert match, f"{self.name}: unexpected first line {line!r} (see {log.name})"
        self.port = int(match.group(2))
        return self

    def sessions_active(self) -> int:
        """The replica's kettle_sessions_active gauge, read from its /metrics."""
        import urllib.request

        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as response:
            text = response.read().decode()
        match = re.search(r"^kettle_sessions_active (\S+)$", text, re.M)
        assert match, "no kettle_sessions_active in /metrics"
        return int(float(match.group(1)))

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(30)

    def terminate(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)

    def restart(self) -> Replica:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        return self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def _first_line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if sel.select(timeout=0.5):
                return proc.stdout.readline()
            if proc.poll() is not None:
                return ""
    proc.kill()
    raise AssertionError(f"kettle serve printed nothing in {timeout_s} s")


@pytest.fixture
def serve_replica(tmp_path: Path) -> Iterator[Callable[..., Replica]]:
    """A factory: ``serve_replica("--max-sessions", "2")`` starts one and returns it."""
    started: list[Replica] = []

    def make(*args: str) -> Replica:
        replica = Replica(tmp_path, f"replica{len(started)}", args)
        started.append(replica)
        return replica.start()

    try:
        yield make
    finally:
        for replica in started:
            replica.stop()


def heading_anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings: lowercased, punctuation dropped,
    spaces to -."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def readme_python_blocks(heading: str) -> list[str]:
    """The python blocks of README.md's section under ``heading`` (a whole heading line, e.g.
    "## Protocol"), up to the next ## or ### heading (a single # starts a comment inside a
    code block), exactly as they stand there."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert f"\n{heading}\n" in text, f"no {heading!r} in README.md"
    section = re.split(r"\n##+ ", text.split(f"\n{heading}\n", 1)[1], maxsplit=1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)
