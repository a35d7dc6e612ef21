"""`observer probe gpu-burn`: keeps one GPU busy at a target utilisation for a duration,
holding a given amount of its memory, through the CUDA driver API (cuda.py) and a PTX busy
kernel the driver JIT-compiles. Utilisation as NVML counts it is the share of time a kernel
runs, so the duty cycle is: launch slices of about SLICE_SECONDS, then idle long enough
that busy / (busy + idle) is the target."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from observer.workloads.cuda import CudaDriver

KERNEL_NAME = "observer_burn"
# A dependent chain of fused multiply-adds per thread, its result stored so the compiler
# keeps it; ISA 7.0 and sm_52 are JIT-compiled by every driver from CUDA 11.0 on, for
# whatever GPU the node has.
PTX = f"""\
.version 7.0
.target sm_52
.address_size 64

.visible .entry {KERNEL_NAME}(
    .param .u64 out,
    .param .u32 iterations
)
{{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<4>;

    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [iterations];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r2, %r2, %r3, %r4;
    cvt.rn.f32.u32 %f1, %r2;
    mov.f32 %f2, 0f3F800000;
    mov.u32 %r5, 0;
BURN:
    fma.rn.f32 %f1, %f1, 0f3F7FFFFE, %f2;
    add.u32 %r5, %r5, 1;
    setp.lt.u32 %p, %r5, %r1;
    @%p bra BURN;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r2, 4;
    add.u64 %rd2, %rd2, %rd3;
    st.global.f32 [%rd2], %f1;
    ret;
}}
"""
BLOCKS = 4096  # enough resident warps for every SM of the largest GPUs
THREADS = 256
OUT_BYTES = BLOCKS * THREADS * 4  # one float per thread, at the start of the allocation
SLICE_SECONDS = 0.1
FIRST_ITERATIONS = 1 << 12
MAX_ITERATIONS = 1 << 31


@dataclass(frozen=True, slots=True)
class Burn:
    seconds: float
    memory_bytes: int
    utilization_percent: float
    device: int


@dataclass(frozen=True, slots=True)
class BurnResult:
    launches: int
    busy_seconds: float
    elapsed_seconds: float

    @property
    def duty_percent(self) -> float:
        return 100.0 * self.busy_seconds / self.elapsed_seconds if self.elapsed_seconds else 0.0


def burn(
    work: Burn,
    open_driver: Callable[[int], CudaDriver] = CudaDriver.open,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> BurnResult:
    """Run the burn; raises the WorkloadError of the first driver call that fails."""
    driver = open_driver(work.device)
    try:
        pointer = driver.allocate(max(work.memory_bytes, OUT_BYTES))
        kernel = driver.load_kernel(PTX, KERNEL_NAME)
        start = clock()
        end = start + work.seconds
        iterations, launches, busy = FIRST_ITERATIONS, 0, 0.0
        idle_per_busy = (100.0 - work.utilization_percent) / work.utilization_percent
        while (now := clock()) < end:
            driver.launch(kernel, BLOCKS, THREADS, pointer, iterations)
            driver.synchronize()
            took = clock() - now
            launches += 1
            busy += took
            # Scale the next slice toward SLICE_SECONDS (the first ones are calibration).
            scale = SLICE_SECONDS / took if took > 0 else 2.0
            iterations = int(min(max(iterations * min(scale, 2.0), 1), MAX_ITERATIONS))
            if idle_per_busy > 0:
                sleep(min(took * idle_per_busy, max(end - clock(), 0.0)))
        return BurnResult(launches, busy, clock() - start)
    finally:
        driver.close()
