"""The statistics' device helpers: where they run, what they copy, and TF32 held off within a block."""
import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info

from lotlib.stats.backend import (
    as_tensor,
    no_tf32,
    single_thread,
    stats_device,
    to_numpy,
)


def test_statistics_run_on_the_device_named_and_on_the_cpu_for_mps():
    assert stats_device("cpu") == torch.device("cpu")
    assert stats_device(torch.device("cpu")) == torch.device("cpu")
    assert stats_device("mps") == torch.device("cpu")  # no float64 on MPS
    assert stats_device("cuda:1") == torch.device("cuda:1")  # named, whether or not there is one
    with pytest.raises(RuntimeError):
        stats_device("auto")  # a model's device is resolved before the statistics are asked to run there


def test_arrays_cross_without_a_copy_on_the_cpu():
    a = np.arange(6.0).reshape(2, 3)
    t = as_tensor(a, "cpu")
    assert t.dtype == torch.float64 and np.shares_memory(to_numpy(t), a)
    assert as_tensor(t, "cpu") is t
    assert as_tensor(a, "cpu", torch.float32).dtype == torch.float32


def test_no_tf32_restores_the_setting_it_found():
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        for setting in (True, False):
            torch.backends.cuda.matmul.allow_tf32 = setting
            with no_tf32():
                assert torch.backends.cuda.matmul.allow_tf32 is False
            assert torch.backends.cuda.matmul.allow_tf32 is setting
        torch.backends.cuda.matmul.allow_tf32 = True
        with pytest.raises(ValueError), no_tf32():
            raise ValueError
        assert torch.backends.cuda.matmul.allow_tf32 is True
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def test_single_thread_holds_torch_and_blas_to_one_thread_and_restores_them():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with single_thread():
            assert torch.get_num_threads() == 1
            assert all(pool["num_threads"] == 1 for pool in threadpool_info())
        assert torch.get_num_threads() == 2
        with pytest.raises(ValueError), single_thread():
            raise ValueError
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
