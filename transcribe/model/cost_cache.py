"""The measured cost profile, kept on disk so start-up need not measure it again.

Measuring a model's costs (``cost_probe``) takes 2-5 s of start-up on a 2-core CPU. The
result depends on the model, the device, the compute type, the thread count and the machine,
so it is stored under a key of exactly those (``CostKey``) plus ``VERSION`` (bumped when the
probe changes what it measures), one small JSON file per key in ``$KETTLE_CACHE_DIR/costs``.
A file that is missing, unreadable or made for another key is measured again and rewritten;
the scheduler corrects a stored profile online anyway (``cost_model.CostModel.observe``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import platform
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kettle.transcribe.model.costs import CostProfile

logger = logging.getLogger(__name__)

VERSION = 2  # bump when cost_probe measures differently: older files are then ignored
# (2: each timing the least of two runs; version 1 kept what a busy machine measured)


@dataclass(frozen=True)
class CostKey:
    model: str  # the model's name and the identity of its weights file
    device: str
    compute_type: str
    threads: int  # as configured (0: the library's default for this machine)
    machine: str  # CPU model and count, and the inference library's version
    replicas: int = 1  # model replicas that share each batch (ModelConfig.replicas)
    version: int = VERSION

    def fields(self) -> dict[str, object]:
        """The key as stored; one replica's without ``replicas``, as before replicas existed,
        so a server's profiles stored then still serve."""
        out = dataclasses.asdict(self)
        if self.replicas == 1:
            del out["replicas"]
        return out

    def digest(self) -> str:
        text = json.dumps(self.fields(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]


def machine_id(library_version: str) -> str:
    """What makes two machines' measurements differ: CPU model, CPU count, library."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{cpu} x{os.cpu_count()} lib {library_version}"


def weights_id(model_dir: Path) -> str:
    """The weights file's size and modification time: cheap, and changes when it does."""
    try:
        stat = (model_dir / "model.bin").stat()
    except OSError:
        return str(model_dir)
    return f"{model_dir.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


def path_for(folder: Path, key: CostKey) -> Path:
    return folder / f"{key.digest()}.json"


def load(folder: Path, key: CostKey) -> CostProfile | None:
    """The stored profile for exactly this key, or None (absent, unreadable, another key)."""
    path = path_for(folder, key)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("key") != key.fields():
            return None
        return CostProfile.from_dict(data["profile"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        logger.warning("ignoring the cost cache file %s: %s", path, exc)
        return None


def store(folder: Path, key: CostKey, profile: CostProfile) -> None:
    """Write atomically (a reader never sees half a file); failures are only logged."""
    data = {"key": key.fields(), "profile": profile.to_dict()}
    tmp: str | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".costs-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
        os.replace(tmp, path_for(folder, key))
    except OSError as exc:
        logger.warning("could not store the measured costs in %s: %s", folder, exc)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
