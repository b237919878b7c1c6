"""GPU buffers: CUDA arrays (``__cuda_array_interface__``) and CUDA DLPack
tensors in protect, save/load and history push/pop (docs/gpu.md).

The memory comes from the CUDA driver the core loads, named by
CAIRN_CUDA_DRIVER: tests/python/run.sh points it at the fake driver of the
CMake build tree (<build>/lib/libcairn_fake_cuda.so, testing/fake_cuda), which
keeps device memory out of the CPU's reach (any host access faults), so a
device pointer copied as if it were host memory crashes instead of passing.
Without CAIRN_CUDA_DRIVER the module is skipped. The same calls work on a real
driver (CAIRN_CUDA_DRIVER=libcuda.so.1 on a GPU node).

The driver is used through ctypes, by the documented driver API (cuInit,
cuDevicePrimaryCtxRetain, cuCtxSetCurrent, cuMemAlloc, cuMemcpyHtoD, ...);
ctypes opens the same library file as the core, so both see the same
allocations. :class:`DeviceArray` wraps an allocation in the smallest object
CuPy, numba or torch would also give: ``__cuda_array_interface__`` version 3.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

import numpy as np
import pytest

import cairn

DRIVER = os.environ.get("CAIRN_CUDA_DRIVER", "")

pytestmark = pytest.mark.skipif(
    not DRIVER,
    reason="no CUDA driver: tests/python/run.sh sets CAIRN_CUDA_DRIVER to the fake "
    "<build>/lib/libcairn_fake_cuda.so when the CMake tree built it (cuda.h found)",
)


class CudaError(RuntimeError):
    pass


class Cuda:
    """The driver API calls the tests need, on device 0's primary context
    (made current on the calling thread)."""

    def __init__(self, path: str) -> None:
        self.lib = ctypes.CDLL(path)
        self._call("cuInit", ctypes.c_uint(0))
        dev = ctypes.c_int()
        self._call("cuDeviceGet", ctypes.byref(dev), ctypes.c_int(0))
        self.ctx = ctypes.c_void_p()
        self._call("cuDevicePrimaryCtxRetain", ctypes.byref(self.ctx), dev)
        self.make_current()

    def _call(self, name: str, *args: Any) -> None:
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            raise CudaError(f"{name} failed: CUresult {rc}")

    def make_current(self) -> None:
        self._call("cuCtxSetCurrent", self.ctx)

    def alloc(self, nbytes: int) -> int:
        p = ctypes.c_uint64()
        self._call("cuMemAlloc_v2", ctypes.byref(p), ctypes.c_size_t(nbytes))
        return p.value

    def alloc_managed(self, nbytes: int) -> int:
        p = ctypes.c_uint64()
        CU_MEM_ATTACH_GLOBAL = 1
        self._call(
            "cuMemAllocManaged", ctypes.byref(p), ctypes.c_size_t(nbytes), ctypes.c_uint(CU_MEM_ATTACH_GLOBAL)
        )
        return p.value

    def free(self, ptr: int) -> None:
        self._call("cuMemFree_v2", ctypes.c_uint64(ptr))

    def htod(self, dst: int, src: np.ndarray[Any, Any]) -> None:
        src = np.ascontiguousarray(src)
        self._call(
            "cuMemcpyHtoD_v2", ctypes.c_uint64(dst), ctypes.c_void_p(src.ctypes.data), ctypes.c_size_t(src.nbytes)
        )

    def dtoh(self, src: int, dtype: Any, shape: Tuple[int, ...]) -> np.ndarray[Any, Any]:
        out = np.empty(shape, dtype)
        self._call(
            "cuMemcpyDtoH_v2", ctypes.c_void_p(out.ctypes.data), ctypes.c_uint64(src), ctypes.c_size_t(out.nbytes)
        )
        return out


class DeviceArray:
    """A C-contiguous array in device memory, exported the way CuPy and numba
    do (``__cuda_array_interface__`` version 3). Frees its memory on close()."""

    def __init__(
        self,
        cuda: Cuda,
        shape: Tuple[int, ...],
        dtype: Any = np.float32,
        *,
        managed: bool = False,
        read_only: bool = False,
        strides: Optional[Tuple[int, ...]] = None,
    ) -> None:
        self.cuda = cuda
        self.shape = shape
        self.np_dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(shape)) * self.np_dtype.itemsize
        self.ptr = cuda.alloc_managed(self.nbytes) if managed else cuda.alloc(self.nbytes)
        self.read_only = read_only
        self.strides = strides

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": self.np_dtype.str,
            "data": (self.ptr, self.read_only),
            "strides": self.strides,
            "stream": None,
        }

    def set(self, values: np.ndarray[Any, Any]) -> None:
        assert values.shape == self.shape and values.dtype == self.np_dtype
        self.cuda.htod(self.ptr, values)

    def get(self) -> np.ndarray[Any, Any]:
        return self.cuda.dtoh(self.ptr, self.np_dtype, self.shape)

    def close(self) -> None:
        if self.ptr:
            self.cuda.free(self.ptr)
            self.ptr = 0


@pytest.fixture(scope="module")
def cuda() -> Cuda:
    try:
        return Cuda(DRIVER)
    except (OSError, CudaError) as e:
        pytest.skip(f"CUDA driver {DRIVER} unusable: {e}")


@pytest.fixture
def device_array(cuda: Cuda) -> Iterator[Callable[..., DeviceArray]]:
    """Makes DeviceArrays on the current test's thread; frees them afterwards."""
    made: list[DeviceArray] = []

    def make(shape: Tuple[int, ...], dtype: Any = np.float32, **kw: Any) -> DeviceArray:
        cuda.make_current()
        a = DeviceArray(cuda, shape, dtype, **kw)
        made.append(a)
        return a

    yield make
    for a in made:
        a.close()


# -- no data moves: the binding alone ---------------------------------------------


def test_protect_and_unprotect_device_array(client: cairn.Client, device_array: Callable[..., DeviceArray]) -> None:
    a = device_array((16, 16))
    client.protect(0, a)
    client.protect(0, a)  # re-protecting replaces
    client.unprotect(0)
    with pytest.raises(cairn.NotFoundError):
        client.unprotect(0)


def test_read_only_device_array(
    client: cairn.Client, device_array: Callable[..., DeviceArray]
) -> None:
    a = device_array((64,), read_only=True)
    with pytest.raises(cairn.InvalidArgumentError, match="read-only"):
        client.protect(0, a)
    with client.history("ro") as h, pytest.raises(cairn.InvalidArgumentError, match="read-only"):
        h.pop(0, out=a)


def test_non_contiguous_device_array(
    client: cairn.Client, device_array: Callable[..., DeviceArray]
) -> None:
    a = device_array((8, 8), strides=(4, 32))  # a transposed view: F order is fine
    client.protect(0, a)
    b = device_array((8, 8), strides=(64, 8))  # every other column
    with pytest.raises(cairn.InvalidArgumentError, match="not contiguous"):
        client.protect(1, b)


# -- data moves through the core's GPU tier ------------------------------------------


@pytest.mark.parametrize("device_cache", [0, "8MiB"])
def test_checkpoint_restore_device_array(
    make_client: Callable[..., cairn.Client],
    device_array: Callable[..., DeviceArray],
    device_cache: Any,
) -> None:
    c = make_client(device_cache=device_cache)
    a = device_array((256, 1024))  # 1 MiB: one block
    host = np.zeros(1000)
    c.protect(0, a)
    c.protect(1, host)
    want = {}
    for v in range(3):
        want[v] = np.random.default_rng(v).standard_normal((256, 1024)).astype(np.float32)
        a.set(want[v])
        host[:] = v
        c.checkpoint("dev", v)
    c.wait("dev", 2, "local")
    a.set(np.zeros((256, 1024), np.float32))
    c.restore("dev", 1)
    np.testing.assert_array_equal(a.get(), want[1])
    np.testing.assert_array_equal(host, np.ones(1000))
    st = c.stats()
    assert st.device.gpu
    assert st.device.capture.bytes == 3 * a.nbytes
    assert st.capture.bytes >= 3 * (a.nbytes + host.nbytes)
    if device_cache:
        assert st.device.capacity_bytes == 8 << 20
    else:
        assert st.device.capacity_bytes == 0 and st.device.hits == 0


def test_restore_from_file_into_device_array(
    make_client: Callable[..., cairn.Client],
    device_array: Callable[..., DeviceArray],
) -> None:
    a = device_array((3, 5000), np.float64)
    want = np.arange(15000.0).reshape(3, 5000)
    a.set(want)
    with make_client(device_cache="4MiB") as c:
        c.protect(0, a)
        c.checkpoint("file", 7)
    a.set(np.zeros_like(want))
    c2 = make_client()
    c2.protect(0, a)
    assert c2.latest("file") == 7
    c2.restore("file", 7)
    np.testing.assert_array_equal(a.get(), want)


def test_save_load_mixes_host_and_device_arrays(
    client: cairn.Client, device_array: Callable[..., DeviceArray]
) -> None:
    w = device_array((64, 32))
    w_values = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32)
    w.set(w_values)
    state: Dict[str, Any] = {"w": w, "step": np.array([42], np.int64)}
    client.save("model", 0, state)
    # Device arrays load into host arrays and back: the manifest has numpy dtypes.
    host_w = np.zeros((64, 32), np.float32)
    client.load("model", 0, {"w": host_w, "step": np.zeros(1, np.int64)})
    np.testing.assert_array_equal(host_w, w_values)
    w.set(np.zeros((64, 32), np.float32))
    step = np.zeros(1, np.int64)
    client.load("model", 0, {"w": w, "step": step})
    np.testing.assert_array_equal(w.get(), w_values)
    assert step[0] == 42
    wrong = device_array((32, 64))
    with pytest.raises(cairn.SizeMismatchError, match=r"'w': checkpoint has float32\[64, 32\]"):
        client.load("model", 0, {"w": wrong, "step": step})


def test_history_push_pop_device_arrays(
    make_client: Callable[..., cairn.Client],
    device_array: Callable[..., DeviceArray],
) -> None:
    c = make_client(device_cache="4MiB")
    steps = [device_array((1000 * (s + 1),)) for s in range(4)]
    with c.history("adj") as h:
        for s, a in enumerate(steps):
            a.set(np.full(a.shape, s, np.float32))
            h.push(s, a)
        for s in reversed(range(4)):
            out = device_array(steps[s].shape)
            assert h.pop(s, out=out) is out
            np.testing.assert_array_equal(out.get(), np.full(out.shape, s, np.float32))
        h.push(9, steps[0])
        host = np.zeros(1000, np.float32)  # a device step pops into host memory too
        h.pop(9, out=host)
        np.testing.assert_array_equal(host, np.zeros(1000, np.float32))


def test_managed_memory(
    client: cairn.Client, device_array: Callable[..., DeviceArray]
) -> None:
    a = device_array((4096,), np.int32, managed=True)
    a.set(np.arange(4096, dtype=np.int32))
    client.protect(0, a)
    client.checkpoint("managed", 0)
    a.set(np.zeros(4096, np.int32))
    client.restore("managed", 0)
    np.testing.assert_array_equal(a.get(), np.arange(4096, dtype=np.int32))
