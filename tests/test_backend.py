"""One place picks the backend; flags and EGGNOG_BACKEND override it; transfers round-trip."""

import numpy as np
import pytest

from eggnog.kernels.core import backend
from eggnog.kernels.core.backend import Backend, resolve_name, select_backend
from eggnog.kernels.core.placement import to_host
from eggnog.runtime.errors import BadInput


def test_auto_picks_cuda_on_the_simulator():
    assert resolve_name(None, environ={}) == "cuda"  # the tests run with NUMBA_ENABLE_CUDASIM=1


def test_flag_beats_environment_beats_auto():
    assert resolve_name("cpu", environ={"EGGNOG_BACKEND": "cuda"}) == "cpu"
    assert resolve_name(None, environ={"EGGNOG_BACKEND": "cpu"}) == "cpu"
    assert resolve_name(None, environ={"EGGNOG_BACKEND": " CUDA "}) == "cuda"


def test_unknown_backend_is_bad_input():
    with pytest.raises(BadInput, match="unknown backend 'tpu'"):
        resolve_name("tpu", environ={})


def test_cuda_without_gpu_is_bad_input(monkeypatch):
    monkeypatch.setattr(backend, "gpu_usable", lambda: False)
    with pytest.raises(BadInput, match="no usable GPU"):
        resolve_name("cuda", environ={})
    assert resolve_name("auto", environ={}) == "cpu"


def test_selection_is_made_once(monkeypatch):
    monkeypatch.setattr(backend, "_selected", None)
    chosen = select_backend("cuda", local_rank=3)
    assert chosen.simulated and chosen.name == "cuda"
    assert select_backend("cuda") is chosen
    assert backend.current_backend() is chosen
    with pytest.raises(BadInput, match="already set"):
        select_backend("cpu")


@pytest.mark.parametrize("name", ["cpu", "cuda"])
def test_transfers_round_trip(name):
    b = Backend(name, simulated=name == "cuda")
    host = np.arange(24, dtype=np.int8).reshape(4, 6)
    device = b.to_device(host)
    assert np.array_equal(to_host(device), host)
    assert to_host(b.zeros((3,), np.float32)).tolist() == [0.0, 0.0, 0.0]
    assert to_host(b.empty((2, 2), np.int32)).shape == (2, 2)
    if name == "cpu":
        assert device is host or np.shares_memory(device, host)
