"""The CUDA driver API boundary: the only module that loads libcuda.so.1 (ctypes; the NVIDIA
container runtime injects the library, Slurm GPU nodes have it with the driver). No toolkit:
kernels come as PTX text, JIT-compiled by the driver. Every failure becomes one error of
observer.errors with the call and CUDA's own error name."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from observer.errors import CudaCallError, GpuOutOfMemoryError, NoGpuError

LIBRARY = "libcuda.so.1"
# cuda.h's CUresult values the messages tell apart.
CUDA_SUCCESS = 0
CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_INVALID_DEVICE = 101
CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
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


@dataclass(frozen=True, slots=True)
class PeerCopy:
    """Copies from one device's memory to another's, timed by events on the source's stream."""

    source: int
    target: int
    peer_access: bool  # the driver lets the source reach the target directly (P2P)
    bytes_per_second: float


class _Library:
    """libcuda.so.1 loaded and initialised, its calls declared; errors in CUDA's own names."""

    def __init__(self) -> None:
        try:
            self._lib = ctypes.CDLL(LIBRARY)
        except OSError:
            raise NoGpuError(_NO_DRIVER) from None
        _declare(self._lib)
        code = self._lib.cuInit(0)
        if code != CUDA_SUCCESS:
            raise NoGpuError(f"no CUDA device visible: cuInit failed: {self._name(code)}")

    def _context_on(self, device: int) -> ctypes.c_void_p:
        """A new context on `device`, current on this thread."""
        handle = ctypes.c_int()
        code = self._lib.cuDeviceGet(ctypes.byref(handle), device)
        if code != CUDA_SUCCESS:
            raise NoGpuError(
                f"no CUDA device visible: device {device}: {self._name(code)} "
                "(CUDA_VISIBLE_DEVICES or the job's GPU allocation decides which are seen)"
            )
        context = ctypes.c_void_p()
        self._check(
            "cuCtxCreate_v2",
            self._lib.cuCtxCreate_v2(ctypes.byref(context), CU_CTX_SCHED_BLOCKING_SYNC, handle),
        )
        return context

    def _allocate(self, size_bytes: int) -> ctypes.c_uint64:
        """Device memory of `size_bytes` in the current context."""
        pointer = ctypes.c_uint64()
        code = self._lib.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size_bytes))
        if code == CUDA_ERROR_OUT_OF_MEMORY:
            raise GpuOutOfMemoryError(
                f"out of GPU memory: cuMemAlloc_v2 of {size_bytes / 2**30:.1f} GiB failed: "
                f"{self._name(code)}"
            )
        self._check("cuMemAlloc_v2", code)
        return pointer

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


class CudaDriver(_Library):
    """One context on one device: open() it, use it, close() it."""

    def __init__(self, device: int) -> None:
        super().__init__()
        self._modules: list[ctypes.c_void_p] = []
        self._allocations: list[ctypes.c_uint64] = []
        self._context = self._context_on(device)

    @classmethod
    def open(cls, device: int) -> CudaDriver:
        """Load the driver, initialise it and create a context on `device`. NoGpuError when
        there is no library or no such device."""
        return cls(device)

    def allocate(self, size_bytes: int) -> int:
        """Device memory of `size_bytes`; GpuOutOfMemoryError when the GPU has not that much."""
        pointer = self._allocate(size_bytes)
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


class CudaDevices(_Library):
    """A context on each device the job sees, for copies between them: open() it, copy(),
    close() it."""

    def __init__(self) -> None:
        super().__init__()
        count = ctypes.c_int()
        self._check("cuDeviceGetCount", self._lib.cuDeviceGetCount(ctypes.byref(count)))
        self._contexts: list[ctypes.c_void_p] = []
        try:
            for device in range(count.value):
                self._contexts.append(self._context_on(device))
        except Exception:
            self.close()
            raise

    @classmethod
    def open(cls) -> CudaDevices:
        return cls()

    @property
    def count(self) -> int:
        return len(self._contexts)

    def name(self, device: int) -> str:
        text = ctypes.create_string_buffer(256)
        self._check("cuDeviceGetName", self._lib.cuDeviceGetName(text, len(text), device))
        return text.value.decode(errors="replace")

    def copy(self, source: int, target: int, size_bytes: int, repeats: int) -> PeerCopy:
        """Copy `size_bytes` from `source` to `target` `repeats` times after one untimed copy,
        with peer access enabled where the driver allows it; the rate between two events."""
        can = ctypes.c_int()
        self._check(
            "cuDeviceCanAccessPeer",
            self._lib.cuDeviceCanAccessPeer(ctypes.byref(can), source, target),
        )
        self._current(target)
        to = self._allocate(size_bytes)
        try:
            self._current(source)
            origin = self._allocate(size_bytes)
            try:
                if can.value:
                    code = self._lib.cuCtxEnablePeerAccess(self._contexts[target], 0)
                    if code != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
                        self._check("cuCtxEnablePeerAccess", code)
                copies = functools.partial(
                    self._lib.cuMemcpyPeerAsync,
                    to,
                    self._contexts[target],
                    origin,
                    self._contexts[source],
                    size_bytes,
                    None,
                )
                seconds = self._timed(copies, repeats)
            finally:
                self._lib.cuMemFree_v2(origin)
        finally:
            self._lib.cuMemFree_v2(to)
        return PeerCopy(source, target, bool(can.value), size_bytes * repeats / seconds)

    def _timed(self, copy: Callable[[], int], repeats: int) -> float:
        """Seconds `repeats` copies take on the current context's stream, one untimed first."""
        start, end = ctypes.c_void_p(), ctypes.c_void_p()
        try:
            for event in (start, end):
                self._check("cuEventCreate", self._lib.cuEventCreate(ctypes.byref(event), 0))
            self._check("cuMemcpyPeerAsync", copy())
            self._check("cuEventRecord", self._lib.cuEventRecord(start, None))
            for _ in range(repeats):
                self._check("cuMemcpyPeerAsync", copy())
            self._check("cuEventRecord", self._lib.cuEventRecord(end, None))
            self._check("cuEventSynchronize", self._lib.cuEventSynchronize(end))
            elapsed_ms = ctypes.c_float()
            self._check(
                "cuEventElapsedTime",
                self._lib.cuEventElapsedTime(ctypes.byref(elapsed_ms), start, end),
            )
        finally:
            for event in (start, end):
                if event.value:
                    self._lib.cuEventDestroy_v2(event)
        return max(elapsed_ms.value, 1e-6) / 1000

    def close(self) -> None:
        """Destroy every context; errors here change nothing."""
        for context in self._contexts:
            self._lib.cuCtxDestroy_v2(context)
        self._contexts = []

    def _current(self, device: int) -> None:
        self._check("cuCtxSetCurrent", self._lib.cuCtxSetCurrent(self._contexts[device]))


def _declare(library: ctypes.CDLL) -> None:
    """cuda.h's prototypes, so ctypes passes every argument at its declared width."""
    p, i, u, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t
    pp, pointer = ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64
    signatures: dict[str, Sequence[type]] = {
        "cuInit": [u],
        "cuDeviceGet": [ctypes.POINTER(i), i],
        "cuDeviceGetCount": [ctypes.POINTER(i)],
        "cuDeviceGetName": [ctypes.c_char_p, i, i],
        "cuDeviceCanAccessPeer": [ctypes.POINTER(i), i, i],
        "cuCtxCreate_v2": [pp, u, i],
        "cuCtxDestroy_v2": [p],
        "cuCtxSetCurrent": [p],
        "cuCtxSynchronize": [],
        "cuCtxEnablePeerAccess": [p, u],
        "cuMemAlloc_v2": [ctypes.POINTER(pointer), size],
        "cuMemFree_v2": [pointer],
        "cuMemcpyPeerAsync": [pointer, p, pointer, p, size, p],
        "cuEventCreate": [pp, u],
        "cuEventRecord": [p, p],
        "cuEventSynchronize": [p],
        "cuEventElapsedTime": [ctypes.POINTER(ctypes.c_float), p, p],
        "cuEventDestroy_v2": [p],
        "cuModuleLoadData": [pp, ctypes.c_char_p],
        "cuModuleGetFunction": [pp, p, ctypes.c_char_p],
        "cuModuleUnload": [p],
        "cuLaunchKernel": [p, u, u, u, u, u, u, u, p, pp, pp],
        "cuGetErrorName": [i, ctypes.POINTER(ctypes.c_char_p)],
    }
    for name, arguments in signatures.items():
        function = getattr(library, name)
        function.argtypes = list(arguments)
        function.restype = ctypes.c_int
