"""Arrays from other libraries (kernels/core/placement.py `adopt`), on the simulator: an object with
`__cuda_array_interface__` is taken on "cuda" without a copy (a kernel writes through it), a strided one
is seen as not C-contiguous, CPU tensors are read through DLPack without a copy, GPU arrays are refused
on the host backends in one sentence, and `to_host`, `Kernels.to_device` and `on_device` follow the
same rules."""

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import cuda, on_device
from eggnog.kernels.core.placement import adopt, is_c_contiguous, kernels_for, to_host
from eggnog.kernels.rnn.scan import reference_scan_forward, scan_forward
from eggnog.runtime.errors import BadInput


class CudaArrayInterface:
    """What PyTorch, CuPy and JAX GPU arrays expose, over host memory (the simulator's device memory)."""

    def __init__(self, host):
        self.host = host
        self.__cuda_array_interface__ = {"shape": host.shape, "typestr": host.dtype.str,
                                         "data": (host.ctypes.data, False), "strides": None, "version": 3}


def strided(host, step):
    """The interface of every `step`-th column of `host` (a 2-D C-contiguous array)."""
    return interface_of_view(host[:, ::step], host)


def interface_of_view(view, owner):
    """The interface of a NumPy view of `owner`'s memory, with its strides."""
    array = CudaArrayInterface(owner)
    array.__cuda_array_interface__ = {"shape": view.shape, "typestr": view.dtype.str,
                                      "data": (view.ctypes.data, False), "strides": view.strides, "version": 3}
    return array


class GpuDlpackOnly:
    """A GPU array that speaks DLPack only (device type 2: CUDA)."""

    def __dlpack__(self, stream=None):
        raise AssertionError("never read")

    def __dlpack_device__(self):
        return 2, 0


def test_a_cuda_array_interface_is_adopted_without_a_copy():
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    adopted = adopt(CudaArrayInterface(host), "cuda")
    assert adopted.shape == (3, 4) and adopted.dtype == np.float32
    adopted[1, 2] = -7.0
    assert host[1, 2] == -7.0
    host[0, 0] = 5.0
    assert adopted.copy_to_host()[0, 0] == 5.0


def test_a_kernel_writes_through_an_adopted_output():
    rng = np.random.default_rng(3)
    k, u = (rng.normal(size=(2, 5, 3)).astype(np.float32) for _ in range(2))
    out = np.zeros_like(k)
    scan_forward("cuda", adopt(CudaArrayInterface(k), "cuda"), adopt(CudaArrayInterface(u), "cuda"),
                 out=adopt(CudaArrayInterface(out), "cuda"))
    np.testing.assert_allclose(out, reference_scan_forward(k, u), rtol=1e-5, atol=1e-6)


def test_non_contiguous_arrays_are_detected():
    host = np.arange(24, dtype=np.float32).reshape(4, 6)
    assert is_c_contiguous(host) and not is_c_contiguous(host[:, ::2])
    assert is_c_contiguous(CudaArrayInterface(host))
    assert not is_c_contiguous(strided(host, 2))
    assert not is_c_contiguous(adopt(strided(host, 2), "cuda"))
    assert is_c_contiguous(adopt(CudaArrayInterface(host), "cuda"))
    device = cuda.to_device(host)
    assert is_c_contiguous(device) and not is_c_contiguous(device[:, ::2])
    # a dimension of size one may carry any stride, as NumPy counts it
    one_row = interface_of_view(host[:1], host)
    one_row.__cuda_array_interface__["strides"] = (999, 4)
    assert is_c_contiguous(one_row)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_gpu_arrays_are_refused_on_host_backends_in_one_sentence(backend):
    host = np.zeros((2, 2), np.float32)
    for gpu_array in (CudaArrayInterface(host), cuda.to_device(host), GpuDlpackOnly()):
        with pytest.raises(BadInput) as refused:
            adopt(gpu_array, backend)
        message = str(refused.value)
        assert f"is on the GPU; the {backend} backend takes host arrays" in message
        assert "\n" not in message and message.count(". ") == 0
        with pytest.raises(BadInput, match="is on the GPU"):
            kernels_for(backend).to_device(gpu_array)


def test_what_no_backend_can_take_is_refused_naming_its_type():
    for backend in ("numpy", "cpu", "cuda"):
        with pytest.raises(BadInput, match="not a dict"):
            adopt({"a": 1}, backend)
    with pytest.raises(BadInput, match="GpuDlpackOnly on the GPU with DLPack but no __cuda_array_interface__"):
        adopt(GpuDlpackOnly(), "cuda")
    with pytest.raises(BadInput, match="unknown kernel backend 'tpu'"):
        adopt(np.zeros(2), "tpu")


def test_host_arrays_stay_themselves():
    host = np.zeros(3, np.float32)
    for backend in ("numpy", "cpu", "cuda"):
        assert adopt(host, backend) is host
    device = cuda.to_device(host)
    assert adopt(device, "cuda") is device


def test_to_host_reads_any_array():
    host = np.arange(6, dtype=np.int32).reshape(2, 3)
    copied = to_host(CudaArrayInterface(host))
    np.testing.assert_array_equal(copied, host)
    np.testing.assert_array_equal(to_host(cuda.to_device(host)), host)
    assert to_host(host) is host


def test_gpu_arrays_reach_cuda_without_an_upload():
    host = np.arange(4, dtype=np.float64)  # a GPU array keeps its dtype: the registry checks it
    for taken in (kernels_for("cuda").to_device(CudaArrayInterface(host)), on_device(CudaArrayInterface(host))):
        assert taken.dtype == np.float64
        taken[0] = 9.0
        assert host[0] == 9.0


def test_torch_cpu_tensors_share_memory_through_dlpack():
    torch = pytest.importorskip("torch")
    tensor = torch.arange(6, dtype=torch.float32)
    for backend in ("numpy", "cpu", "cuda"):  # on cuda a host array, for the launcher to upload
        adopted = adopt(tensor, backend)
        assert isinstance(adopted, np.ndarray)
        adopted[0] = 42.0
        assert tensor[0].item() == 42.0
    kernels_for("cpu").to_device(tensor)[1] = 43.0  # float32 and contiguous already: no copy
    assert tensor[1].item() == 43.0
    np.testing.assert_array_equal(to_host(tensor), tensor.numpy())
    with pytest.raises(BadInput, match="could not be read through DLPack"):
        adopt(tensor.requires_grad_(), "cpu")


def test_an_op_takes_a_cuda_array_interface_as_it_is_and_checks_it():
    """Through the registry: the raw objects are adopted (the kernel writes into the caller's memory), and a
    wrong dtype or a strided one is refused in one sentence naming the argument."""
    rng = np.random.default_rng(4)
    k, u = (rng.normal(size=(2, 5, 3)).astype(np.float32) for _ in range(2))
    out = np.zeros_like(k)
    scan_forward("cuda", CudaArrayInterface(k), CudaArrayInterface(u), out=CudaArrayInterface(out))
    np.testing.assert_allclose(out, reference_scan_forward(k, u), rtol=1e-5, atol=1e-6)
    with pytest.raises(BadInput, match=r"^scan_forward: u must be float32 .*got float64$"):
        scan_forward("cuda", CudaArrayInterface(k), CudaArrayInterface(u.astype(np.float64)))
    wide = np.zeros((2, 5, 6), np.float32)
    with pytest.raises(BadInput, match=r"^scan_forward: out must be C-contiguous on the GPU"):
        scan_forward("cuda", CudaArrayInterface(k), CudaArrayInterface(u), out=interface_of_view(wide[:, :, ::2], wide))
