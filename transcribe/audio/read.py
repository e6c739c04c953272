"""Read audio files (or bytes) into float32 mono 16 kHz arrays.

libsndfile (soundfile) is tried first because it is fast and exact for WAV/FLAC/Ogg; anything it
cannot read goes to PyAV (mp3, m4a, opus in odd containers, video files). Headerless PCM needs
an explicit ``RawFormat``. Every failure becomes an ``AudioError`` with a one-line reason.

Truncated files: whatever decodes before the damage is kept (a cut recording is still worth
transcribing); a file where nothing decodes is an error.
"""

from __future__ import annotations

import io
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from kettle.kernels import pcm
from kettle.kernels.resample import MAX_RATE, MIN_RATE, resample
from kettle.transcribe.errors import AudioError
from kettle.transcribe.types import SAMPLE_RATE

log = logging.getLogger(__name__)

RAW_ENCODINGS = ("s16le", "f32le", "mulaw", "alaw")
RAW_SUFFIXES = frozenset({".raw", ".pcm"})
_RAW_BYTES = {"s16le": 2, "f32le": 4, "mulaw": 1, "alaw": 1}

# Extensions treated as audio when a folder is searched.
AUDIO_EXTENSIONS = frozenset(
    {
        ".wav", ".wave", ".flac", ".mp3", ".ogg", ".oga", ".opus", ".m4a", ".mp4", ".aac",
        ".wma", ".aif", ".aiff", ".aifc", ".au", ".snd", ".caf", ".webm", ".mka", ".mkv",
        ".mov", ".amr", ".ac3", ".w64", ".raw", ".pcm",
    }
)  # fmt: skip


@dataclass(frozen=True)
class RawFormat:
    """Layout of headerless PCM: sample encoding, rate and channel count."""

    encoding: str = "s16le"
    sample_rate: int = SAMPLE_RATE
    channels: int = 1

    def __post_init__(self) -> None:
        if self.encoding not in RAW_ENCODINGS:
            raise AudioError(
                f"raw encoding {self.encoding!r} is not one of {', '.join(RAW_ENCODINGS)}"
            )
        if not 1000 <= self.sample_rate <= 384000:
            raise AudioError(f"raw sample rate {self.sample_rate} is outside 1000..384000 Hz")
        if not 1 <= self.channels <= 32:
            raise AudioError(f"raw channel count {self.channels} is outside 1..32")

    @classmethod
    def parse(cls, spec: str) -> RawFormat:
        """Parse ``ENCODING[:RATE[:CHANNELS]]``, e.g. ``s16le:16000:1``."""
        parts = spec.strip().split(":")
        if not 1 <= len(parts) <= 3 or not parts[0]:
            raise AudioError(f"bad raw format {spec!r}: expected ENCODING:RATE:CHANNELS")
        try:
            rate = int(parts[1]) if len(parts) > 1 else SAMPLE_RATE
            channels = int(parts[2]) if len(parts) > 2 else 1
        except ValueError:
            raise AudioError(
                f"bad raw format {spec!r}: rate and channels must be integers"
            ) from None
        return cls(parts[0].lower(), rate, channels)

    @property
    def frame_bytes(self) -> int:
        """Bytes of one sample frame (one sample of every channel)."""
        return _RAW_BYTES[self.encoding] * self.channels

    def __str__(self) -> str:
        return f"{self.encoding}:{self.sample_rate}:{self.channels}"


def load_audio(
    source: str | Path | bytes, raw: RawFormat | None = None, *, name: str | None = None
) -> np.ndarray:
    """Decode a file path or in-memory bytes to float32 mono at 16 kHz.

    ``name`` is what warnings call in-memory bytes (the file they were read from).
    Raises ``AudioError`` for a missing, empty, unreadable or undecodable input.
    """
    if isinstance(source, bytes):
        data: bytes | None = source
        if not data:
            raise AudioError("empty input (0 bytes)")
    else:
        check_path(Path(source), raw)
        data = None
    if raw is not None:
        if data is None:
            data = _read(Path(source))  # type: ignore[arg-type]
        return decode_raw(data, raw)
    return _decode_container(source if data is None else data, name)


def load_audio_channels(source: bytes, raw: RawFormat | None = None) -> list[np.ndarray]:
    """As `load_audio` for in-memory bytes, but each channel on its own: one float32 16 kHz
    array per channel (Deepgram's multichannel)."""
    if not source:
        raise AudioError("empty input (0 bytes)")
    if raw is not None:
        usable = len(source) - len(source) % raw.frame_bytes
        if usable == 0:
            raise AudioError(f"raw input holds no complete {raw} sample frame")
        frames = _decode_pcm(source[:usable], raw.encoding).reshape(-1, raw.channels)
        return [_finish(frames[:, i], raw.sample_rate) for i in range(raw.channels)]
    try:
        import soundfile as sf

        with sf.SoundFile(io.BytesIO(source)) as f:
            rate, frames = f.samplerate, f.read(dtype="float32", always_2d=True)
    except Exception as exc:  # not a format libsndfile reads: PyAV's turn
        log.debug("soundfile could not read the input (%s); trying PyAV", exc)
        return _pyav_channels(source)
    if not frames.size:
        raise AudioError("no audio samples in file")
    return [_finish(frames[:, i], rate) for i in range(frames.shape[1])]


def _pyav_channels(source: bytes) -> list[np.ndarray]:
    import av

    try:
        with av.open(io.BytesIO(source), mode="r") as container:
            stream = container.streams.audio[0]
            channels = stream.codec_context.layout.nb_channels
            resampler = av.AudioResampler(
                format="fltp", layout=av.AudioLayout(f"{channels}c"), rate=SAMPLE_RATE
            )
            planes = [
                out.to_ndarray()
                for frame in container.decode(stream)
                for out in resampler.resample(frame)
            ]
            planes += [out.to_ndarray() for out in resampler.resample(None)]
    except (av.FFmpegError, IndexError, ValueError) as exc:
        raise AudioError(f"not a decodable audio file ({_short(exc)})") from None
    if not planes:
        raise AudioError("no audio samples decoded (no audio stream, or damaged)")
    frames = np.concatenate(planes, axis=1)
    return [_finish(frames[i], SAMPLE_RATE) for i in range(channels)]


def check_path(path: Path, raw: RawFormat | None) -> None:
    """The checks ``load_audio`` makes of a path before decoding it (the same errors)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise AudioError("no such file") from None
    except OSError as exc:
        raise AudioError(f"cannot read: {exc.strerror or exc}") from None
    if path.is_dir():
        raise AudioError("is a directory")
    if size == 0:
        raise AudioError("empty file (0 bytes)")
    if raw is None and path.suffix.lower() in RAW_SUFFIXES:
        raise AudioError("headerless PCM: pass --raw ENCODING:RATE:CHANNELS (e.g. s16le:16000:1)")


def read_input(path: Path, raw: RawFormat | None) -> bytes:
    """A file's bytes, for decoding elsewhere (``load_audio(data, raw, name=...)``), after
    the same checks ``load_audio`` makes of a path."""
    check_path(path, raw)
    return _read(path)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise AudioError(f"cannot read: {exc.strerror or exc}") from None


def decode_raw(data: bytes, fmt: RawFormat) -> np.ndarray:
    """Decode headerless PCM bytes; a trailing partial frame is dropped."""
    frame = fmt.frame_bytes
    usable = len(data) - len(data) % frame
    if usable == 0:
        raise AudioError(f"raw input holds no complete {fmt} sample frame")
    if usable != len(data):
        log.warning("raw input: dropped %d trailing bytes (partial frame)", len(data) - usable)
    buf = data[:usable]
    samples = _decode_pcm(buf, fmt.encoding)
    if fmt.channels > 1:
        samples = pcm.mix_down(samples, fmt.channels)
    return _finish(samples, fmt.sample_rate)


def _decode_pcm(buf: bytes, encoding: str) -> np.ndarray:
    decoders = {
        "s16le": pcm.decode_s16le,
        "f32le": pcm.decode_f32le,
        "mulaw": pcm.decode_mulaw,
        "alaw": pcm.decode_alaw,
    }
    return decoders[encoding](buf)


def _mix_down(frames: np.ndarray) -> np.ndarray:
    """(frames, channels) -> mono."""
    return pcm.mix_down(np.ascontiguousarray(frames).reshape(-1), frames.shape[1])


def _resample(samples: np.ndarray, rate: int) -> np.ndarray:
    if rate == SAMPLE_RATE:
        return samples
    if not MIN_RATE <= rate <= MAX_RATE:
        raise AudioError(f"unsupported sample rate {rate} Hz")
    return resample(samples, rate, SAMPLE_RATE)


def _finish(samples: np.ndarray, rate: int) -> np.ndarray:
    samples = np.ascontiguousarray(samples, dtype=np.float32)
    if not np.all(np.isfinite(samples)):
        samples = np.nan_to_num(samples, nan=0.0, posinf=1.0, neginf=-1.0)
    out = _resample(samples, rate)
    if out.size == 0:
        raise AudioError("no audio samples decoded")
    return np.ascontiguousarray(out, dtype=np.float32)


def _open(source: str | Path | bytes) -> str | BinaryIO:
    return io.BytesIO(source) if isinstance(source, bytes) else str(source)


def _decode_container(source: str | Path | bytes, name: str | None = None) -> np.ndarray:
    sf_reason = ""
    try:
        return _decode_soundfile(source, name)
    except AudioError:
        raise
    except Exception as exc:  # libsndfile's errors are plain RuntimeErrors and friends
        sf_reason = str(exc)
        log.debug("soundfile could not read the input (%s); trying PyAV", exc)
    try:
        return _decode_pyav(source)
    except AudioError:
        raise
    except Exception as exc:
        log.debug("PyAV could not decode the input: %s (soundfile: %s)", exc, sf_reason)
        raise AudioError(f"not a decodable audio file ({_short(exc)})") from None


def _decode_soundfile(source: str | Path | bytes, name: str | None = None) -> np.ndarray:
    import soundfile as sf

    if name is None:
        name = Path(source).name if isinstance(source, (str, Path)) else "<input>"
    damage = ""
    with sf.SoundFile(_open(source)) as f:
        rate = f.samplerate
        declared = _declared_frames(f)
        blocks = []
        try:
            # Block reads so a file damaged part-way keeps what came before the damage.
            for block in f.blocks(blocksize=1 << 14, dtype="float32", always_2d=True):
                blocks.append(block)
        except Exception as exc:
            if not blocks:
                raise
            damage = f" ({exc})"
    if not blocks:
        raise AudioError("no audio samples in file")
    frames = np.concatenate(blocks)
    if damage or len(frames) < declared:
        # A cut-off or damaged file (an interrupted copy or recording): say so, keep the rest.
        log.warning(
            "%s: file is damaged or cut off after %.1f s of %.1f s; transcribing that part%s",
            name,
            len(frames) / rate,
            max(declared, len(frames)) / rate,
            damage,
        )
    return _finish(_mix_down(frames) if frames.shape[1] > 1 else frames[:, 0], rate)


def _declared_frames(f: Any) -> int:
    """The length the file's header promises, in frames (0 when unknown).

    libsndfile trims a WAV whose data chunk runs past the end of the file to what is there,
    and reports the header's figure only in its log ("data : 187360 (should be 93658)").
    """
    frames = int(f.frames) if f.seekable() else 0
    match = re.search(r"^data\s*:\s*(\d+) \(should be (\d+)\)", f.extra_info, re.M)
    if match and int(match.group(2)) > 0:
        frames = round(frames * int(match.group(1)) / int(match.group(2)))
    return frames


def _decode_pyav(source: str | Path | bytes) -> np.ndarray:
    from kettle.transcribe.model import fw

    samples = fw.decode_audio(_open(source), sampling_rate=SAMPLE_RATE)
    samples = np.asarray(samples, dtype=np.float32)
    if samples.size == 0:
        raise AudioError("no audio samples decoded (no audio stream, or damaged)")
    return _finish(samples, SAMPLE_RATE)


def _short(exc: BaseException) -> str:
    # PyAV errors carry the path in str(); the caller already names the file.
    strerror = getattr(exc, "strerror", None)
    text = " ".join((strerror or str(exc)).split()) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def is_audio_path(path: Path) -> bool:
    return path.suffix.lower() in AUDIO_EXTENSIONS
