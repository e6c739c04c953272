"""torch backend of log_mel_batch: parity with numpy (CPU always, CUDA when present)."""

from __future__ import annotations

import numpy as np
import pytest
from kettle.kernels.logmel import log_mel_batch

torch = pytest.importorskip("torch")

# torch.stft and numpy's FFT are different implementations: measured at most 8.5e-6 apart
# on these windows (128 mels, CPU); 1e-4 leaves 10x for other CPUs and for CUDA's FFT.
TOL = 1e-4


def _windows(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = [0, 1, 150, 201, 399, 4000, 16000 * 9 + 17, 480000, 500000]
    out = []
    for n in lengths:
        x = rng.standard_normal(n).astype(np.float32) * 0.02
        if n > 4000:
            x[n // 2 : n // 2 + 4000] += np.sin(np.arange(4000) * 0.2).astype(np.float32)
        out.append(x)
    return out


@pytest.mark.parametrize("n_mels", [80, 128])
def test_torch_cpu_equals_numpy(n_mels: int) -> None:
    windows = _windows()
    want = log_mel_batch(windows, n_mels=n_mels, backend="numpy")
    got = log_mel_batch(windows, n_mels=n_mels, backend="torch", device="cpu")
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL)


def test_torch_short_n_frames_and_empty_batch() -> None:
    windows = _windows(1)[3:7]
    want = log_mel_batch(windows, n_frames=50, backend="numpy")
    np.testing.assert_allclose(log_mel_batch(windows, n_frames=50, backend="torch"), want, atol=TOL)
    assert log_mel_batch([], backend="torch").shape == (0, 80, 3000)


def test_auto_on_cpu_uses_numpy_result() -> None:
    windows = _windows(2)[5:7]
    np.testing.assert_array_equal(
        log_mel_batch(windows, backend="auto", device="cpu"),
        log_mel_batch(windows, backend="numpy"),
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_torch_cuda_without_cuda_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="CUDA"):
        log_mel_batch(_windows()[4:5], backend="torch", device="cuda")
    # "auto" falls back to numpy instead.
    assert log_mel_batch(_windows()[4:5], backend="auto", device="cuda").shape == (1, 80, 3000)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("n_mels", [80, 128])
def test_torch_cuda_equals_numpy(n_mels: int) -> None:
    windows = _windows(3)
    want = log_mel_batch(windows, n_mels=n_mels, backend="numpy")
    for backend in ("torch", "auto"):
        got = log_mel_batch(windows, n_mels=n_mels, backend=backend, device="cuda")
        np.testing.assert_allclose(got, want, rtol=0, atol=TOL)
