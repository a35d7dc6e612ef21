/* A stand-in libcuda.so.1 for tests on machines without a GPU: the CUDA driver calls
 * observer/workloads/cuda.py makes, with cuda.h's types, recording each call as one line in
 * $FAKE_CUDA_LOG and checking what a real driver would refuse: a PTX image without
 * .version/.target/.entry, a function name the module does not declare, a launch whose
 * parameters are not (device pointer inside an allocation, iteration count > 0).
 * Knobs: FAKE_CUDA_DEVICES (default 1; 0: cuInit answers CUDA_ERROR_NO_DEVICE),
 * FAKE_CUDA_MEMORY_BYTES (default 80 GiB), FAKE_CUDA_NS_PER_ITERATION (how long
 * cuCtxSynchronize takes per kernel iteration, default 1000). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

enum {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    NOT_INITIALIZED = 3,
    NO_DEVICE = 100,
    INVALID_DEVICE = 101,
    INVALID_IMAGE = 200,
    INVALID_CONTEXT = 201,
    INVALID_HANDLE = 400,
    NOT_FOUND = 500,
};

#define MAX_ALLOCATIONS 64
#define NAME_BYTES 128

static int initialised;
static int context_made;
static unsigned long long used_bytes;
static CUdeviceptr next_pointer = 0x7f0000000000ULL;
static struct { CUdeviceptr at; size_t size; } allocations[MAX_ALLOCATIONS];
static int allocation_count;
static struct { char entry[NAME_BYTES]; int loaded; } module;
static struct { int made; } function;
static unsigned long long pending_iterations;

static void record(const char *format, ...) {
    const char *path = getenv("FAKE_CUDA_LOG");
    if (!path) return;
    FILE *log = fopen(path, "a");
    if (!log) return;
    va_list args;
    va_start(args, format);
    vfprintf(log, format, args);
    va_end(args);
    fputc('\n', log);
    fclose(log);
}

static long long knob(const char *name, long long fallback) {
    const char *value = getenv(name);
    return value && *value ? atoll(value) : fallback;
}

CUresult cuGetErrorName(CUresult error, const char **name) {
    switch (error) {
    case OK: *name = "CUDA_SUCCESS"; break;
    case INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case NOT_INITIALIZED: *name = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case NO_DEVICE: *name = "CUDA_ERROR_NO_DEVICE"; break;
    case INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; break;
    case INVALID_IMAGE: *name = "CUDA_ERROR_INVALID_IMAGE"; break;
    case INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case INVALID_HANDLE: *name = "CUDA_ERROR_INVALID_HANDLE"; break;
    case NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; break;
    default: *name = NULL; return INVALID_VALUE;
    }
    return OK;
}

CUresult cuInit(unsigned int flags) {
    record("cuInit flags=%u", flags);
    if (flags != 0) return INVALID_VALUE;
    if (knob("FAKE_CUDA_DEVICES", 1) <= 0) return NO_DEVICE;
    initialised = 1;
    return OK;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    record("cuDeviceGet ordinal=%d", ordinal);
    if (!initialised) return NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= knob("FAKE_CUDA_DEVICES", 1)) return INVALID_DEVICE;
    *device = ordinal;
    return OK;
}

CUresult cuCtxCreate_v2(CUcontext *context, unsigned int flags, CUdevice device) {
    record("cuCtxCreate_v2 flags=%u device=%d", flags, device);
    if (!initialised) return NOT_INITIALIZED;
    if (device < 0 || device >= knob("FAKE_CUDA_DEVICES", 1)) return INVALID_DEVICE;
    context_made = 1;
    *context = (CUcontext)&context_made;
    return OK;
}

CUresult cuCtxDestroy_v2(CUcontext context) {
    record("cuCtxDestroy_v2 ok=%d", context == (CUcontext)&context_made);
    if (context != (CUcontext)&context_made) return INVALID_CONTEXT;
    context_made = 0;
    return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t size) {
    if (!context_made) return INVALID_CONTEXT;
    unsigned long long total = (unsigned long long)knob("FAKE_CUDA_MEMORY_BYTES", 80LL << 30);
    if (size == 0 || allocation_count == MAX_ALLOCATIONS) return INVALID_VALUE;
    if (used_bytes + size > total) {
        record("cuMemAlloc_v2 bytes=%zu refused=out_of_memory", size);
        return OUT_OF_MEMORY;
    }
    allocations[allocation_count].at = next_pointer;
    allocations[allocation_count].size = size;
    allocation_count++;
    *pointer = next_pointer;
    next_pointer += (size + 0xfffff) & ~0xfffffULL;
    used_bytes += size;
    record("cuMemAlloc_v2 bytes=%zu", size);
    return OK;
}

CUresult cuMemFree_v2(CUdeviceptr pointer) {
    for (int i = 0; i < allocation_count; i++) {
        if (allocations[i].at == pointer) {
            used_bytes -= allocations[i].size;
            allocations[i] = allocations[--allocation_count];
            record("cuMemFree_v2 ok=1");
            return OK;
        }
    }
    record("cuMemFree_v2 ok=0");
    return INVALID_VALUE;
}

/* The PTX must declare its ISA version, its target and one .entry, whose name is kept. */
CUresult cuModuleLoadData(CUmodule *out, const void *image) {
    const char *ptx = image;
    if (!context_made) return INVALID_CONTEXT;
    const char *entry = ptx ? strstr(ptx, ".entry ") : NULL;
    if (!ptx || !*ptx || !strstr(ptx, ".version ") || !strstr(ptx, ".target ") || !entry) {
        record("cuModuleLoadData bytes=%zu valid=0", ptx ? strlen(ptx) : 0);
        return INVALID_IMAGE;
    }
    entry += strlen(".entry ");
    size_t n = strcspn(entry, " (\n\t");
    if (n == 0 || n >= NAME_BYTES) return INVALID_IMAGE;
    memcpy(module.entry, entry, n);
    module.entry[n] = '\0';
    module.loaded = 1;
    *out = (CUmodule)&module;
    record("cuModuleLoadData bytes=%zu valid=1 entry=%s", strlen(ptx), module.entry);
    return OK;
}

CUresult cuModuleUnload(CUmodule handle) {
    record("cuModuleUnload ok=%d", handle == (CUmodule)&module);
    if (handle != (CUmodule)&module) return INVALID_HANDLE;
    module.loaded = 0;
    return OK;
}

CUresult cuModuleGetFunction(CUfunction *out, CUmodule handle, const char *name) {
    record("cuModuleGetFunction name=%s", name ? name : "(null)");
    if (handle != (CUmodule)&module || !module.loaded) return INVALID_HANDLE;
    if (!name || strcmp(name, module.entry) != 0) return NOT_FOUND;
    function.made = 1;
    *out = (CUfunction)&function;
    return OK;
}

static int inside_allocation(CUdeviceptr pointer) {
    for (int i = 0; i < allocation_count; i++)
        if (pointer >= allocations[i].at && pointer < allocations[i].at + allocations[i].size)
            return 1;
    return 0;
}

/* The busy kernel's parameters: (.u64 out, .u32 iterations). */
CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz,
                        unsigned int shared_bytes, CUstream stream, void **params, void **extra) {
    if (f != (CUfunction)&function || !function.made) return INVALID_HANDLE;
    if (!params || extra || gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 ||
        bx * by * bz > 1024)
        return INVALID_VALUE;
    CUdeviceptr out = *(CUdeviceptr *)params[0];
    unsigned int iterations = *(unsigned int *)params[1];
    int ok = inside_allocation(out) && iterations > 0;
    record("cuLaunchKernel grid=%ux%ux%u block=%ux%ux%u shared=%u stream=%p params_ok=%d "
           "iterations=%u", gx, gy, gz, bx, by, bz, shared_bytes, stream, ok, iterations);
    if (!ok) return INVALID_VALUE;
    pending_iterations += iterations;
    return OK;
}

CUresult cuCtxSynchronize(void) {
    if (!context_made) return INVALID_CONTEXT;
    unsigned long long ns = pending_iterations * (unsigned long long)knob("FAKE_CUDA_NS_PER_ITERATION", 1000);
    pending_iterations = 0;
    struct timespec pause = {(time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL)};
    nanosleep(&pause, NULL);
    return OK;
}
