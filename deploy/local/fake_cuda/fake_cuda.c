/* A stand-in libcuda.so.1 for tests on machines without a GPU: the CUDA driver calls
 * observer/workloads/cuda.py makes, with cuda.h's types, recording each call as one line in
 * $FAKE_CUDA_LOG and checking what a real driver would refuse: a PTX image without
 * .version/.target/.entry, a function name the module does not declare, a launch whose
 * parameters are not (device pointer inside an allocation, iteration count > 0).
 * Knobs: FAKE_CUDA_DEVICES (default 1; 0: cuInit answers CUDA_ERROR_NO_DEVICE),
 * FAKE_CUDA_MEMORY_BYTES (default 80 GiB), FAKE_CUDA_NS_PER_ITERATION (how long
 * cuCtxSynchronize takes per kernel iteration, default 1000).
 * Between devices (the gpu-comm probe): a context per device, made current by
 * cuCtxSetCurrent; cuMemcpyPeerAsync between allocations advances the stream's clock by
 * bytes / bandwidth, which events read back, with no real wait: FAKE_CUDA_PEER_GBPS (default
 * 380, an H100/H200 NVLink pair), FAKE_CUDA_STAGED_GBPS (default 20: a copy without peer
 * access goes through the host), FAKE_CUDA_NO_PEER and FAKE_CUDA_SLOW_PAIR ("a-b": the two
 * devices cannot reach each other directly, or copy between them at
 * FAKE_CUDA_SLOW_PAIR_GBPS, default half the peer figure). */
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
typedef void *CUevent;
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
    PEER_ACCESS_UNSUPPORTED = 217,
    PEER_ACCESS_ALREADY_ENABLED = 704,
};

#define MAX_ALLOCATIONS 64
#define NAME_BYTES 128
#define MAX_DEVICES 16
#define MAX_EVENTS 64

static int initialised;
static struct { int made; int peers[MAX_DEVICES]; } contexts[MAX_DEVICES];
static int current = -1; /* the device whose context is current */
#define context_made (current >= 0 && contexts[current].made)
/* Each device's stream clock, in nanoseconds of copies queued; what an event records. */
static unsigned long long stream_ns[MAX_DEVICES];
static struct { int made; int recorded; unsigned long long at_ns; } events[MAX_EVENTS];
static unsigned long long used_bytes;
static CUdeviceptr next_pointer = 0x7f0000000000ULL;
static struct { CUdeviceptr at; size_t size; int device; } allocations[MAX_ALLOCATIONS];
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
    case PEER_ACCESS_UNSUPPORTED: *name = "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"; break;
    case PEER_ACCESS_ALREADY_ENABLED: *name = "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"; break;
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

static int devices(void) {
    long long n = knob("FAKE_CUDA_DEVICES", 1);
    return n > MAX_DEVICES ? MAX_DEVICES : (int)n;
}

static int device_of(CUcontext context) {
    for (int d = 0; d < MAX_DEVICES; d++)
        if (context == (CUcontext)&contexts[d] && contexts[d].made) return d;
    return -1;
}

CUresult cuDeviceGetCount(int *count) {
    record("cuDeviceGetCount");
    if (!initialised) return NOT_INITIALIZED;
    *count = devices();
    return OK;
}

CUresult cuDeviceGetName(char *name, int length, CUdevice device) {
    if (!initialised) return NOT_INITIALIZED;
    if (device < 0 || device >= devices()) return INVALID_DEVICE;
    snprintf(name, (size_t)length, "NVIDIA H200 (stand-in)");
    return OK;
}

CUresult cuCtxCreate_v2(CUcontext *context, unsigned int flags, CUdevice device) {
    record("cuCtxCreate_v2 flags=%u device=%d", flags, device);
    if (!initialised) return NOT_INITIALIZED;
    if (device < 0 || device >= devices()) return INVALID_DEVICE;
    memset(&contexts[device], 0, sizeof contexts[device]);
    contexts[device].made = 1;
    current = device;
    *context = (CUcontext)&contexts[device];
    return OK;
}

CUresult cuCtxSetCurrent(CUcontext context) {
    int device = device_of(context);
    if (device < 0) return INVALID_CONTEXT;
    current = device;
    return OK;
}

CUresult cuCtxDestroy_v2(CUcontext context) {
    int device = device_of(context);
    record("cuCtxDestroy_v2 ok=%d", device >= 0);
    if (device < 0) return INVALID_CONTEXT;
    contexts[device].made = 0;
    if (current == device) current = -1;
    return OK;
}

/* "a-b" in the knob's comma-separated list of pairs, either way round. */
static int listed_pair(const char *name, int a, int b) {
    const char *value = getenv(name);
    int x, y, used;
    while (value && *value && sscanf(value, "%d-%d%n", &x, &y, &used) == 2) {
        if ((x == a && y == b) || (x == b && y == a)) return 1;
        value += used;
        if (*value == ',') value++;
    }
    return 0;
}

CUresult cuDeviceCanAccessPeer(int *can, CUdevice device, CUdevice peer) {
    if (!initialised) return NOT_INITIALIZED;
    if (device < 0 || device >= devices() || peer < 0 || peer >= devices()) return INVALID_DEVICE;
    *can = device != peer && !listed_pair("FAKE_CUDA_NO_PEER", device, peer);
    record("cuDeviceCanAccessPeer device=%d peer=%d can=%d", device, peer, *can);
    return OK;
}

CUresult cuCtxEnablePeerAccess(CUcontext peer_context, unsigned int flags) {
    int peer = device_of(peer_context);
    if (!context_made) return INVALID_CONTEXT;
    if (peer < 0 || flags != 0) return INVALID_VALUE;
    record("cuCtxEnablePeerAccess device=%d peer=%d", current, peer);
    if (peer == current || listed_pair("FAKE_CUDA_NO_PEER", current, peer))
        return PEER_ACCESS_UNSUPPORTED;
    if (contexts[current].peers[peer]) return PEER_ACCESS_ALREADY_ENABLED;
    contexts[current].peers[peer] = 1;
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
    allocations[allocation_count].device = current;
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

/* The device whose allocation holds [pointer, pointer + bytes), or -1. */
static int allocation_device(CUdeviceptr pointer, size_t bytes) {
    for (int i = 0; i < allocation_count; i++)
        if (pointer >= allocations[i].at && pointer + bytes <= allocations[i].at + allocations[i].size)
            return allocations[i].device;
    return -1;
}

/* Copies queue on the current context's stream (the null stream) and take bytes / bandwidth. */
CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_context, CUdeviceptr src,
                           CUcontext src_context, size_t bytes, CUstream stream) {
    int to = device_of(dst_context), from = device_of(src_context);
    if (!context_made) return INVALID_CONTEXT;
    if (to < 0 || from < 0 || stream) return INVALID_VALUE;
    if (allocation_device(dst, bytes) != to || allocation_device(src, bytes) != from)
        return INVALID_VALUE;
    double gbps = (double)knob("FAKE_CUDA_PEER_GBPS", 380);
    if (!contexts[from].peers[to] && !contexts[to].peers[from])
        gbps = (double)knob("FAKE_CUDA_STAGED_GBPS", 20);
    else if (listed_pair("FAKE_CUDA_SLOW_PAIR", from, to))
        gbps = (double)knob("FAKE_CUDA_SLOW_PAIR_GBPS", knob("FAKE_CUDA_PEER_GBPS", 380) / 2);
    stream_ns[current] += (unsigned long long)((double)bytes / gbps);
    record("cuMemcpyPeerAsync from=%d to=%d bytes=%zu", from, to, bytes);
    return OK;
}

CUresult cuEventCreate(CUevent *event, unsigned int flags) {
    if (!context_made) return INVALID_CONTEXT;
    for (int i = 0; i < MAX_EVENTS; i++) {
        if (!events[i].made) {
            memset(&events[i], 0, sizeof events[i]);
            events[i].made = 1;
            *event = (CUevent)&events[i];
            record("cuEventCreate flags=%u", flags);
            return OK;
        }
    }
    return OUT_OF_MEMORY;
}

static int event_index(CUevent event) {
    for (int i = 0; i < MAX_EVENTS; i++)
        if (event == (CUevent)&events[i] && events[i].made) return i;
    return -1;
}

CUresult cuEventRecord(CUevent event, CUstream stream) {
    int i = event_index(event);
    if (!context_made) return INVALID_CONTEXT;
    if (i < 0 || stream) return INVALID_HANDLE;
    events[i].recorded = 1;
    events[i].at_ns = stream_ns[current];
    return OK;
}

CUresult cuEventSynchronize(CUevent event) {
    return event_index(event) < 0 ? INVALID_HANDLE : OK;
}

CUresult cuEventElapsedTime(float *milliseconds, CUevent start, CUevent end) {
    int a = event_index(start), b = event_index(end);
    if (a < 0 || b < 0 || !events[a].recorded || !events[b].recorded) return INVALID_HANDLE;
    *milliseconds = (float)((double)(events[b].at_ns - events[a].at_ns) / 1e6);
    return OK;
}

CUresult cuEventDestroy_v2(CUevent event) {
    int i = event_index(event);
    record("cuEventDestroy_v2 ok=%d", i >= 0);
    if (i < 0) return INVALID_HANDLE;
    events[i].made = 0;
    return OK;
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
