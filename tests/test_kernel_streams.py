"""The caller's stream (kernels/core/streams.py), on the simulator: inside `kernels_on_stream` every
launch of a `cuda_api.kernel` carries that stream (seen through the launch wrapper) and still runs;
outside it, or after it, launches carry none; foreign stream objects are read by their handle; a bad
one is refused in one sentence."""

import numpy as np
import pytest

from eggnog.kernels.core import streams
from eggnog.kernels.core.cuda_api import cuda, with_launch_stream
from eggnog.kernels.core.streams import SimulatedExternalStream, as_numba_stream, current_stream, kernels_on_stream
from eggnog.kernels.rnn import scan
from eggnog.runtime.errors import BadInput


class ConfigSpy:
    """Stands in for a simulated kernel's compiled function: notes each launch configuration."""

    def __init__(self, compiled):
        self.compiled, self.configs = compiled, []

    def __getitem__(self, config):
        self.configs.append(tuple(config))
        return self.compiled[config]


@pytest.fixture
def spied_scan(monkeypatch):
    recording = scan.forward_scan_cuda  # the simulator's recording wrapper of the kernel
    spy = ConfigSpy(recording._compiled)
    monkeypatch.setattr(recording, "_compiled", spy)
    return spy


def run_scan():
    rng = np.random.default_rng(5)
    k, u = (rng.normal(size=(2, 6, 3)).astype(np.float32) for _ in range(2))
    got = scan.scan_forward("cuda", cuda.to_device(k), cuda.to_device(u)).copy_to_host()
    np.testing.assert_allclose(got, scan.reference_scan_forward(k, u), rtol=1e-5, atol=1e-6)


def test_launches_carry_the_stream_inside_the_block_only(spied_scan):
    run_scan()
    assert spied_scan.configs and all(len(c) == 2 or c[2] == 0 for c in spied_scan.configs)
    stream = cuda.stream()
    with kernels_on_stream(stream) as used:
        assert used is stream and current_stream() is stream
        before = len(spied_scan.configs)
        run_scan()
    assert len(spied_scan.configs) > before
    assert all(c[2] is stream for c in spied_scan.configs[before:])
    after = len(spied_scan.configs)
    run_scan()
    assert current_stream() is None
    assert all(len(c) == 2 or c[2] == 0 for c in spied_scan.configs[after:])


def test_a_config_naming_a_stream_keeps_it():
    mine, theirs = cuda.stream(), cuda.stream()
    with kernels_on_stream(mine):
        assert with_launch_stream((4, 32)) == (4, 32, mine)
        assert with_launch_stream((4, 32, 0, 128)) == (4, 32, mine, 128)
        assert with_launch_stream((4, 32, theirs, 128)) == (4, 32, theirs, 128)
        with kernels_on_stream(0):  # the default stream, nested
            assert with_launch_stream((4, 32)) == (4, 32)
        assert current_stream() is mine
    assert with_launch_stream((4, 32)) == (4, 32)


class TorchLike:
    cuda_stream = 1234


class CupyLike:
    ptr = 5678


class StreamProtocol:
    def __cuda_stream__(self):
        return 0, 91011


@pytest.mark.parametrize("stream, handle", [(77, 77), (TorchLike(), 1234), (CupyLike(), 5678),
                                            (StreamProtocol(), 91011)])
def test_foreign_streams_are_read_by_their_handle(stream, handle):
    wrapped = as_numba_stream(stream)
    assert isinstance(wrapped, SimulatedExternalStream) and wrapped.handle == handle
    with kernels_on_stream(stream) as used:
        assert with_launch_stream((1, 1))[2] is used


def test_the_default_stream_is_no_stream():
    assert as_numba_stream(0) is None and as_numba_stream(None) is None
    stream = cuda.stream()
    assert as_numba_stream(stream) is stream


@pytest.mark.parametrize("bad", [object(), "7", 1.5, True, -1, type("NoHandle", (), {"ptr": None})()])
def test_a_bad_stream_is_refused_in_one_sentence(bad):
    with pytest.raises(BadInput) as refused:
        with kernels_on_stream(bad):
            pass
    message = str(refused.value)
    assert message.startswith("stream must be a numba stream") and type(bad).__name__ in message
    assert "\n" not in message and ". " not in message
    assert streams.current_stream() is None
