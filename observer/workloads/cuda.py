"""The CUDA driver API boundary: the only module that loads libcuda.so.1 (ctypes; the NVIDIA
container runtime injects the library, Slurm GPU nodes have it with the driver). No toolkit:
kernels come as PTX text, JIT-compiled by the driver. Every failure becomes one error of
observer.errors with the call and CUDA's own error name."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass

from observer.errors import CudaCallError, GpuOutOfMemoryError, NoGpuError

LIBRARY = "libcuda.so.1"
# cuda.h's CUresult values the messages tell apart.
CUDA_SUCCESS = 0
CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_INVALID_DEVICE = 101
# cuCtxCreate's flag: a synchronising thread sleeps until the GPU is done instead of spinning
# a CPU core through each of the burn's duty-cycle slices (the probe's pod asks for little CPU).
CU_CTX_SCHED_BLOCKING_SYNC = 0x04

_NO_DRIVER = (
    f"no {LIBRARY}: this node has no NVIDIA driver, or the container was not started "
    "with the NVIDIA runtime"
)


@dataclass(frozen=True, slots=True)
class Kernel:
    """A function of a loaded module (CUfunction)."""

    handle: ctypes.c_void_p


class CudaDriver:
    """One context on one device: open() it, use it, close() it."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._lib = library
        self._context = ctypes.c_void_p()
        self._modules: list[ctypes.c_void_p] = []
        self._allocations: list[ctypes.c_uint64] = []
        self._declare()

    @classmethod
    def open(cls, device: int) -> CudaDriver:
        """Load the driver, initialise it and create a context on `device`. NoGpuError when
        there is no library or no such device."""
        try:
            library = ctypes.CDLL(LIBRARY)
        except OSError:
            raise NoGpuError(_NO_DRIVER) from None
        driver = cls(library)
        code = library.cuInit(0)
        if code != CUDA_SUCCESS:
            raise NoGpuError(f"no CUDA device visible: cuInit failed: {driver._name(code)}")
        handle = ctypes.c_int()
        code = library.cuDeviceGet(ctypes.byref(handle), device)
        if code != CUDA_SUCCESS:
            raise NoGpuError(
                f"no CUDA device visible: device {device}: {driver._name(code)} "
                "(CUDA_VISIBLE_DEVICES or the job's GPU allocation decides which are seen)"
            )
        driver._check(
            "cuCtxCreate_v2",
            library.cuCtxCreate_v2(
                ctypes.byref(driver._context), CU_CTX_SCHED_BLOCKING_SYNC, handle
            ),
        )
        return driver

    def allocate(self, size_bytes: int) -> int:
        """Device memory of `size_bytes`; GpuOutOfMemoryError when the GPU has not that much."""
        pointer = ctypes.c_uint64()
        code = self._lib.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size_bytes))
        if code == CUDA_ERROR_OUT_OF_MEMORY:
            raise GpuOutOfMemoryError(
                f"out of GPU memory: cuMemAlloc_v2 of {size_bytes / 2**30:.1f} GiB failed: "
                f"{self._name(code)}"
            )
        self._check("cuMemAlloc_v2", code)
        self._allocations.append(pointer)
        return pointer.value

    def load_kernel(self, ptx: str, name: str) -> Kernel:
        """JIT-load `ptx` and return its entry `name`."""
        module = ctypes.c_void_p()
        self._check(
            "cuModuleLoadData",
            self._lib.cuModuleLoadData(ctypes.byref(module), ptx.encode() + b"\0"),
        )
        self._modules.append(module)
        function = ctypes.c_void_p()
        self._check(
            "cuModuleGetFunction",
            self._lib.cuModuleGetFunction(ctypes.byref(function), module, name.encode()),
        )
        return Kernel(function)

    def launch(self, kernel: Kernel, blocks: int, threads: int, pointer: int, count: int) -> None:
        """Launch `kernel(pointer, count)` on blocks x threads (the busy kernel's signature)."""
        arguments = (ctypes.c_uint64(pointer), ctypes.c_uint32(count))
        params = (ctypes.c_void_p * len(arguments))(
            *(ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in arguments)
        )
        self._check(
            "cuLaunchKernel",
            self._lib.cuLaunchKernel(
                kernel.handle, blocks, 1, 1, threads, 1, 1, 0, None, params, None
            ),
        )

    def synchronize(self) -> None:
        self._check("cuCtxSynchronize", self._lib.cuCtxSynchronize())

    def close(self) -> None:
        """Free what was allocated and destroy the context; errors here change nothing."""
        for pointer in self._allocations:
            self._lib.cuMemFree_v2(pointer)
        for module in self._modules:
            self._lib.cuModuleUnload(module)
        if self._context.value:
            self._lib.cuCtxDestroy_v2(self._context)
        self._allocations, self._modules = [], []

    def _check(self, call: str, code: int) -> None:
        if code == CUDA_ERROR_OUT_OF_MEMORY:
            raise GpuOutOfMemoryError(f"out of GPU memory: {call} failed: {self._name(code)}")
        if code != CUDA_SUCCESS:
            raise CudaCallError(f"CUDA driver call {call} failed: {self._name(code)}")

    def _name(self, code: int) -> str:
        text = ctypes.c_char_p()
        if self._lib.cuGetErrorName(code, ctypes.byref(text)) == CUDA_SUCCESS and text.value:
            return f"{text.value.decode()} ({code})"
        return f"CUresult {code}"

    def _declare(self) -> None:
        """cuda.h's prototypes, so ctypes passes every argument at its declared width."""
        lib, p, i, u, size = ctypes, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t
        pp = ctypes.POINTER(ctypes.c_void_p)
        signatures: dict[str, Sequence[type]] = {
            "cuInit": [u],
            "cuDeviceGet": [ctypes.POINTER(i), i],
            "cuCtxCreate_v2": [pp, u, i],
            "cuCtxDestroy_v2": [p],
            "cuCtxSynchronize": [],
            "cuMemAlloc_v2": [ctypes.POINTER(ctypes.c_uint64), size],
            "cuMemFree_v2": [ctypes.c_uint64],
            "cuModuleLoadData": [pp, ctypes.c_char_p],
            "cuModuleGetFunction": [pp, p, ctypes.c_char_p],
            "cuModuleUnload": [p],
            "cuLaunchKernel": [p, u, u, u, u, u, u, u, p, pp, pp],
            "cuGetErrorName": [i, ctypes.POINTER(ctypes.c_char_p)],
        }
        for name, arguments in signatures.items():
            function = getattr(self._lib, name)
            function.argtypes = list(arguments)
            function.restype = lib.c_int
