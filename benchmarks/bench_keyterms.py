"""What keyterms buy: the recall of rare names and terms, with and without them.

Every API's keyterms (Deepgram ``keyterm``/``keywords``, OpenAI ``keywords``, AssemblyAI
``keyterms_prompt``, Flux ``Configure``) become Whisper hotwords (transcribe/model/keyterms.py).
This measures that on held-out sentences, each holding one or two rare names or terms,
synthesized with espeak-ng in two voices:

- ``none``: no keyterms;
- ``keyterms``: the whole vocabulary below (every term of every sentence, 30 in all) as the
  keyterms, as an app would configure its domain once;
- live (a stream through the engine, as the APIs' sockets run it) and file (``kettle
  transcribe``'s pipeline).

Reported: term recall (a term counts when the hypothesis holds it spelled as given, case and
punctuation aside), WER on the sentences' other words (what the hint may cost), and false
terms (vocabulary terms in a hypothesis whose sentence does not hold them). The hotwords'
form was chosen here: a comma list ("A, B, C") against one sentence per term ("A. B. C."),
figures in RESULTS.md.

    python benchmarks/bench_keyterms.py [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import machine_info, markdown_table, write_section

SR = 16000
VOICES = (("en-us", 165), ("en-gb", 150))

# Held out: none of these sentences is in any other benchmark or test. (sentence, terms)
SENTENCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Please ask Siobhan to review the contract before Friday.", ("Siobhan",)),
    ("The Kubernetes cluster restarted twice during the night.", ("Kubernetes",)),
    ("Our flight to Reykjavik leaves from gate twelve.", ("Reykjavik",)),
    ("Doctor Nguyen will see you after lunch.", ("Nguyen",)),
    ("We moved the database from Postgres to Cassandra last year.", ("Postgres", "Cassandra")),
    ("The orchestra played Tchaikovsky and then Dvorak.", ("Tchaikovsky", "Dvorak")),
    ("Send the invoice to Saoirse in accounting.", ("Saoirse",)),
    ("The model runs on CTranslate2 with int8 weights.", ("CTranslate2",)),
    ("Pipecat and LiveKit both support streaming speech.", ("Pipecat", "LiveKit")),
    ("Add a little Worcestershire sauce to the stew.", ("Worcestershire",)),
    ("Mister Llewellyn sold the farm near Aberystwyth.", ("Llewellyn", "Aberystwyth")),
    ("The Deepgram socket closed after ten seconds.", ("Deepgram",)),
    ("Joaquin parked the car outside the library.", ("Joaquin",)),
    ("The Grafana dashboard shows the latency spike.", ("Grafana",)),
    ("She studied the poems of Wislawa Szymborska.", ("Szymborska",)),
    ("The meeting with Xiomara moved to Thursday.", ("Xiomara",)),
    ("Our office in Poughkeepsie closes at five.", ("Poughkeepsie",)),
    ("The pharmacist recommended ibuprofen for the swelling.", ("ibuprofen",)),
    ("Nadia flew from Ouagadougou to Casablanca.", ("Ouagadougou", "Casablanca")),
    ("The Terraform plan deleted three buckets.", ("Terraform",)),
)
VOCABULARY: tuple[str, ...] = tuple(dict.fromkeys(t for _, terms in SENTENCES for t in terms))


def _norm(text: str) -> str:
    return re.sub(r"[^\w\s]", " ", text.lower())


def has_term(hypothesis: str, term: str) -> bool:
    return re.search(rf"\b{re.escape(_norm(term).strip())}\b", _norm(hypothesis)) is not None


def score(rows: list[tuple[str, tuple[str, ...], str]]) -> dict[str, Any]:
    """rows: (reference, its terms, hypothesis)."""
    import jiwer

    said = sum(len(terms) for _, terms, _ in rows)
    found = sum(has_term(hyp, t) for _, terms, hyp in rows for t in terms)
    false = sum(has_term(hyp, t) for _, terms, hyp in rows for t in VOCABULARY if t not in terms)
    from whisper_normalizer.english import EnglishTextNormalizer

    norm = EnglishTextNormalizer()
    refs = [norm(ref) for ref, _, _ in rows]
    hyps = [norm(hyp) or "<empty>" for _, _, hyp in rows]
    return {
        "sentences": len(rows),
        "term_recall": round(100 * found / said, 1),
        "terms_found": f"{found}/{said}",
        "wer": round(100 * float(jiwer.wer(refs, hyps)), 1),
        "false_terms": false,
    }


async def live(decoder: Any, audio: np.ndarray, keyterms: tuple[str, ...]) -> str:
    from kettle.streaming.cli.simulation import Clip, run_simulation
    from kettle.streaming.core.session import SessionConfig
    from kettle.streaming.engine.engine import Engine

    engine = Engine(decoder)
    async with engine:
        result = await run_simulation(
            engine,
            [[Clip("s", audio, None)]],
            realtime=False,
            config=SessionConfig(keyterms=keyterms),
        )
    return result.logs[0].hypothesis()


def file(decoder: Any, audio: np.ndarray, keyterms: tuple[str, ...]) -> str:
    from kettle.transcribe.files.pipeline import PipelineConfig, transcribe_audio

    return transcribe_audio(audio, decoder, PipelineConfig(keyterms=keyterms)).text


def comma_list(terms: Any) -> str | None:
    """The rejected hotwords form, for the side-by-side row."""
    return ", ".join(t for t in terms if t) or None


def main(argv: list[str] | None = None) -> int:
    from bench_accuracy import espeak
    from kettle.transcribe.cli.transcribe import load_decoder
    from kettle.transcribe.model import keyterms as kt

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", default="tiny.en")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    decoder = load_decoder(args.model, args.threads, "cpu", 5)
    clips = [
        (espeak(text, voice, speed), text, terms)
        for voice, speed in VOICES
        for text, terms in SENTENCES
    ]
    silence = np.zeros(SR // 2, np.float32)
    vocabulary = kt.normalize(VOCABULARY)
    table, details = [], []
    sentences_form = kt.hotwords
    for path in ("live", "file"):
        for name, terms in (("none", ()), ("keyterms", vocabulary), ("comma list", vocabulary)):
            # transcribe.keyterms' own form, or the comma list it was measured against
            kt.hotwords = sentences_form if name != "comma list" else comma_list
            rows = []
            for audio, text, said in clips:
                padded = np.concatenate([silence, audio, silence])
                if path == "live":
                    hyp = asyncio.run(live(decoder, padded, terms))
                else:
                    hyp = file(decoder, padded, terms)
                rows.append((text, said, hyp))
                details.append(
                    {"path": path, "keyterms": name, "reference": text, "hypothesis": hyp}
                )
            table.append({"path": path, "keyterms": name, **score(rows)})
            print(json.dumps(table[-1]), file=sys.stderr, flush=True)
    columns = [
        "path",
        "keyterms",
        "sentences",
        "term_recall",
        "terms_found",
        "wer",
        "false_terms",
    ]
    info = machine_info()
    print(json.dumps({"machine": info, "rows": table}, indent=2))
    print(markdown_table(table, columns))
    Path(__file__).with_suffix(".json").write_text(
        json.dumps({"machine": info, "rows": table, "details": details}, indent=2)
    )
    if not args.no_write:
        body = (
            f"Model {args.model}, {args.threads} threads. {len(SENTENCES)} held-out sentences with "
            f"{len(VOCABULARY)} rare names and terms, espeak-ng voices "
            f"{', '.join(v for v, _ in VOICES)}. `keyterms`: the whole vocabulary as keyterms "
            "(Whisper hotwords, transcribe/model/keyterms.py). Recall: terms spelled as given; "
            "wer: the sentences' WER (whisper normalizer); false_terms: vocabulary terms in a "
            "sentence that does not hold them. `comma list`: the hotwords as one list "
            '("A, B, C"), the form kettle does not use.\n\n' + markdown_table(table, columns)
        )
        write_section("bench_keyterms", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
