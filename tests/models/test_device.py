"""Devices and dtypes: a model runs where it was placed, results come back as numpy on the CPU and agree
across devices, the trajectory cache tells dtypes apart. The cuda tests run when torch sees a GPU."""
import numpy as np
import pytest
import torch

from lotlib import capture, load_model
from lotlib.models.corpus import gibberish
from lotlib.models.loading import resolve_device, resolve_dtype
from lotlib.models.trajectories import cache_folder, cache_key

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch")


def test_device_and_dtype_names_are_checked():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type in ("cpu", "cuda", "mps")
    with pytest.raises(ValueError, match="device must be one of auto, cpu, cuda, mps"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="torch sees no CUDA GPU"):
            resolve_device("cuda")
    assert resolve_dtype("bfloat16") is torch.bfloat16
    with pytest.raises(ValueError, match="dtype must be one of float32, bfloat16, float16"):
        resolve_dtype("int8")


def test_lotlib_device_sets_what_auto_means(monkeypatch):
    monkeypatch.setenv("LOTLIB_DEVICE", "cpu")
    assert resolve_device("auto").type == "cpu"
    monkeypatch.setenv("LOTLIB_DEVICE", "tpu")
    with pytest.raises(ValueError, match=r"\$LOTLIB_DEVICE must be one of cpu, cuda, mps .*unset it"):
        resolve_device("auto")
    assert resolve_device("cpu").type == "cpu"  # a device named outright does not read the variable


def test_the_cache_key_holds_the_dtype_not_the_device(tiny_llama_dir):
    corpus = gibberish(50257, n_s=2, n_k=5)
    f32 = load_model(str(tiny_llama_dir), device="cpu")
    bf16 = load_model(str(tiny_llama_dir), device="cpu", dtype="bfloat16")
    assert (f32.dtype, bf16.dtype) == ("float32", "bfloat16")
    keys = [cache_key(m, False, "float32", 256) for m in (f32, bf16)]
    assert cache_folder(keys[0]) != cache_folder(keys[1]) and "device" not in keys[0]
    X = capture(bf16, corpus.ids, progress=False)
    assert X.dtype == np.float32 and np.isfinite(X).all()  # bf16 states come back as float32 numpy


def test_untrained_names_load_the_untrained_variant(tiny_gpt2_dir):
    named = load_model(f"untrained:{tiny_gpt2_dir}", device="cpu")
    flagged = load_model(str(tiny_gpt2_dir), untrained=True, device="cpu")
    assert named.identity == flagged.identity and named.name.startswith("untrained:")
    assert named.identity != load_model(str(tiny_gpt2_dir), device="cpu").identity


@CUDA
@pytest.mark.parametrize("fixture", ["tiny_gpt2_dir", "tiny_llama_dir", "tiny_gemma3_dir"])
def test_cuda_agrees_with_cpu(fixture, request):
    from lotlib.traveling_words.probes import qk_top
    from tests.lines_of_thought.test_truncation import truncated_kl

    folder = str(request.getfixturevalue(fixture))
    cpu, gpu = load_model(folder, device="cpu"), load_model(folder, device="cuda")
    assert gpu.device.type == "cuda"
    ids = gibberish(50257, n_s=4, n_k=9).ids
    X_cpu, X_gpu = capture(cpu, ids, progress=False), capture(gpu, ids, progress=False)
    np.testing.assert_allclose(X_gpu, X_cpu, rtol=1e-3, atol=1e-3)
    states = torch.from_numpy(X_cpu[:, -1])
    torch.testing.assert_close(gpu.view.logits(states).cpu(), cpu.view.logits(states), rtol=1e-3, atol=1e-3)
    queries = torch.tensor([1, 2, 3])
    assert torch.equal(qk_top(gpu.view, 0, queries, k=3)[1].cpu(), qk_top(cpu.view, 0, queries, k=3)[1])
    basis = np.linalg.svd(X_cpu[:, -1].T, full_matrices=False)[0]
    np.testing.assert_allclose(truncated_kl(gpu.view, X_cpu[:, -1], basis, [1, 2], progress=False),
                               truncated_kl(cpu.view, X_cpu[:, -1], basis, [1, 2], progress=False), rtol=1e-2, atol=1e-4)
