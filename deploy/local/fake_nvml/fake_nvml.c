/* A stand-in libnvidia-ml.so.1, so the real pynvml adapter runs without a GPU.
 * Build it with deploy/local/build-fake-nvml.sh.
 *
 * STATE FILE: path in $FAKE_NVML_STATE, looked at on every call, so a test changes the
 * "hardware" while the code under test runs. It is parsed again whenever its path, inode, size
 * or times change: replace the file (write another, rename it over) rather than rewrite it in
 * place, so that two writes within one tick of the file system's clock are told apart.
 * No file means no GPUs. Blank lines and lines starting with '#' are ignored; every other line
 * is one of:
 *
 *   driver_not_loaded          nvmlInit and every call that asks the driver anything fail with
 *                              NVML_ERROR_DRIVER_NOT_LOADED (as when the driver goes away mid-run)
 *   gpu KEY=VALUE ...          one device; devices are indexed in the order of these lines
 *   xid id=N gpu=I code=C      an Xid critical error on device I, queued for the event sets:
 *                              nvmlEventSetWait_v2 returns it once to each set that registered
 *                              device I for Xid events and was created before the line had an
 *                              id this high (ids rise line by line; keep old lines or drop them)
 *
 * GPU keys (all optional; unsigned integers; a missing key reads as 0):
 *   utilization_gpu_percent utilization_memory_percent memory_used_bytes memory_total_bytes
 *   power_milliwatts temperature_celsius sm_clock_mhz clock_event_reasons performance_state
 *   ecc_volatile_uncorrected_errors energy_millijoules
 *   pcie_tx_kilobytes_per_second pcie_rx_kilobytes_per_second
 *   remapped_rows_correctable remapped_rows_uncorrectable remapped_rows_pending remapped_rows_failed
 *   retired_pages_single_bit retired_pages_double_bit retired_pages_pending
 *   ecc_aggregate_uncorrected_errors pcie_replay_errors
 *   sm_active_percent sm_occupancy_percent tensor_active_percent dram_active_percent
 *                              what the GPM metrics SM_UTIL, SM_OCCUPANCY, ANY_TENSOR_UTIL and
 *                              DRAM_BW_UTIL report (see GPM below)
 *   mig_mode                   1: MIG mode is on (nvmlDeviceGetMigMode answers enabled), its MIG
 *                              devices those of `mig` (none when the key is left out)
 *   lost                       1: every call on the device, handle lookup included, answers
 *                              NVML_ERROR_GPU_IS_LOST; as on real NVML, a handle taken before the
 *                              device was seen lost stays lost after it comes back
 * and three lists, comma-separated, no spaces:
 *   processes=PID:BYTES,...    compute processes; BYTES "na" is NVML_VALUE_NOT_AVAILABLE
 *   nvlinks=S:R:V:F:D,...      the device's NVLinks, link 0 first: state (1 active, 0 not) and
 *                              the DL_REPLAY, DL_RECOVERY, DL_CRC_FLIT and DL_CRC_DATA error
 *                              counters; a link past the last answers NVML_ERROR_INVALID_ARGUMENT
 *                              and a device without the key has no NVLink (NOT_SUPPORTED)
 *   mig=GI:CI:USED:TOTAL[:PID/BYTES+...],...
 *                              the MIG devices, index 0 first (with mig_mode=1): GPU and compute
 *                              instance ids, memory used and total, and their compute processes
 *                              (BYTES "na" as above); see MIG below
 *   unsupported=CALL,...       these calls answer NVML_ERROR_NOT_SUPPORTED; CALL is a call name of
 *                              observer/gpu/backend.py (LEAN_CALLS, COUNTER_CALLS,
 *                              XID_EVENTS_CALL: Xid events not among the supported event types,
 *                              and GPM_CALL: a GPU without GPM, as before Hopper)
 * Example:
 *   gpu utilization_gpu_percent=100 memory_used_bytes=22808494080 processes=418:22154313728 unsupported=retired_pages
 *   gpu nvlinks=1:0:0:0:0,1:4:1:2:0,0:0:0:0:0
 *
 * An unknown key or malformed value fails every call with NVML_ERROR_UNKNOWN and says why on
 * stderr. Identity is derived from the index: name "NVIDIA H200 (fake)", UUID
 * GPU-00000000-0000-0000-0000-<index, 12 digits>, PCI bus id 00000000:<index+1, hex>:00.0.
 * Field values answer NVML_FI_DEV_PCIE_REPLAY_COUNTER only (as an unsigned int, like an H200).
 *
 * CALL LOG: when $FAKE_NVML_CALLS names a file, every call appends its NVML symbol as a line,
 * so a test can prove a call was not made.
 *
 * EVENTS: nvmlEventSetCreate/Free, nvmlDeviceGetSupportedEventTypes, nvmlDeviceRegisterEvents
 * (Xid critical errors only) and nvmlEventSetWait_v2, which fills nvml.h's nvmlEventData_t and
 * polls the state file every 2 ms until its timeout (NVML_ERROR_TIMEOUT).
 *
 * GPM: nvmlGpmQueryDeviceSupport (isSupportedDevice 0 with unsupported=gpm, whose
 * nvmlGpmSampleGet then answers NOT_SUPPORTED), nvmlGpmSampleAlloc/Free, nvmlGpmSampleGet and
 * nvmlGpmMetricsGet. Each device integrates its configured activity over time, as the hardware
 * counts cycles; a sample holds the integrals and the time it was taken, and the metrics of two
 * samples are the time-weighted mean activity between them (a state change mid-interval counts
 * for the part of the interval after it). The four metrics above are served; any other metric
 * id answers NOT_SUPPORTED in its own nvmlReturn.
 *
 * MIG: nvmlDeviceGetMigMode, nvmlDeviceGetMaxMigDeviceCount (7),
 * nvmlDeviceGetMigDeviceHandleByIndex (NOT_FOUND past the last device), and on a MIG device's
 * handle nvmlDeviceGetUUID (MIG-00000000-0000-0000-<slot + 1, 4 digits>-<GPU index, 12 digits>),
 * nvmlDeviceGetGpuInstanceId, nvmlDeviceGetComputeInstanceId, nvmlDeviceGetMemoryInfo and
 * nvmlDeviceGetComputeRunningProcesses_v3 (its own processes and memory). In MIG mode the GPU's
 * own process list is every MIG device's processes, memory not available. unsupported=mig: a
 * GPU without MIG (the MIG calls answer NOT_SUPPORTED). A MIG handle taken before the device
 * left the state file answers INVALID_ARGUMENT.
 *
 * Thread-safe like NVML: one lock around every call (a wait holds it only while it looks).
 */
#define _GNU_SOURCE /* PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP */
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "nvml.h"

#define MAX_GPUS 64 /* the handle keeps the index in its low 8 bits */
#define MAX_PROCS 64
#define MAX_MIG 7 /* an H100's or H200's most MIG devices (seven 1g slices) */
#define MAX_MIG_PROCS 16
#define MIG_SHIFT 48 /* a MIG device's handle: its parent's, with its slot + 1 from this bit */
#define GENERATION_MASK ((1ULL << (MIG_SHIFT - 8)) - 1)
#define MAX_XIDS 1024
#define NOT_AVAILABLE (~0ULL)
#define NVLINK_COUNTERS 4 /* NVML_NVLINK_ERROR_DL_REPLAY .. NVML_NVLINK_ERROR_DL_CRC_DATA */

/* Call names, as the adapter names them; the bit of each in gpu_t.unsupported. */
enum call {
    C_UTILIZATION, C_MEMORY, C_PROCESSES, C_POWER, C_TEMPERATURE, C_SM_CLOCK,
    C_CLOCK_EVENT_REASONS, C_PERFORMANCE_STATE, C_ECC_VOLATILE_UNCORRECTED, C_ENERGY,
    C_PCIE_TX, C_PCIE_RX, C_REMAPPED_ROWS, C_RETIRED_PAGES, C_RETIRED_PAGES_PENDING,
    C_ECC_AGGREGATE_UNCORRECTED, C_PCIE_REPLAY, C_NVLINK_ERRORS, C_XID_EVENTS, C_GPM, C_MIG, C_COUNT,
    C_ALWAYS = -1 /* identity calls, and those of other NVML clients: never made unsupported */
};
static const char *const CALL_NAMES[C_COUNT] = {
    "utilization", "memory", "processes", "power", "temperature", "sm_clock",
    "clock_event_reasons", "performance_state", "ecc_volatile_uncorrected", "energy",
    "pcie_tx_throughput", "pcie_rx_throughput", "remapped_rows", "retired_pages",
    "retired_pages_pending", "ecc_aggregate_uncorrected", "pcie_replay", "nvlink_errors",
    "xid_events", "gpm", "mig",
};

/* One MIG device: its GPU and compute instance ids, memory, and compute processes. */
typedef struct {
    unsigned long long gi, ci, used, total;
    unsigned nprocs;
    unsigned pid[MAX_MIG_PROCS];
    unsigned long long used_by[MAX_MIG_PROCS];
} mig_t;

typedef struct {
    unsigned long long utilization_gpu_percent, utilization_memory_percent, memory_used_bytes,
        memory_total_bytes, power_milliwatts, temperature_celsius, sm_clock_mhz,
        clock_event_reasons, performance_state, ecc_volatile_uncorrected_errors,
        energy_millijoules, pcie_tx_kilobytes_per_second, pcie_rx_kilobytes_per_second,
        remapped_rows_correctable, remapped_rows_uncorrectable, remapped_rows_pending,
        remapped_rows_failed, retired_pages_single_bit, retired_pages_double_bit,
        retired_pages_pending, ecc_aggregate_uncorrected_errors, pcie_replay_errors,
        sm_active_percent, sm_occupancy_percent, tensor_active_percent, dram_active_percent, lost,
        mig_mode;
    unsigned nprocs;
    unsigned pid[MAX_PROCS];
    unsigned long long used[MAX_PROCS];
    unsigned nlinks;
    unsigned long long nvlink[NVML_NVLINK_MAX_LINKS][1 + NVLINK_COUNTERS]; /* state, counters */
    unsigned unsupported; /* bit per enum call */
    unsigned nmig;
    mig_t mig[MAX_MIG];
} gpu_t;

#define KEY(f) { #f, offsetof(gpu_t, f) }
static const struct { const char *name; size_t offset; } KEYS[] = {
    KEY(utilization_gpu_percent), KEY(utilization_memory_percent), KEY(memory_used_bytes),
    KEY(memory_total_bytes), KEY(power_milliwatts), KEY(temperature_celsius), KEY(sm_clock_mhz),
    KEY(clock_event_reasons), KEY(performance_state), KEY(ecc_volatile_uncorrected_errors),
    KEY(energy_millijoules), KEY(pcie_tx_kilobytes_per_second), KEY(pcie_rx_kilobytes_per_second),
    KEY(remapped_rows_correctable), KEY(remapped_rows_uncorrectable), KEY(remapped_rows_pending),
    KEY(remapped_rows_failed), KEY(retired_pages_single_bit), KEY(retired_pages_double_bit),
    KEY(retired_pages_pending), KEY(ecc_aggregate_uncorrected_errors), KEY(pcie_replay_errors),
    KEY(sm_active_percent), KEY(sm_occupancy_percent), KEY(tensor_active_percent),
    KEY(dram_active_percent), KEY(lost), KEY(mig_mode),
};

/* The GPM metrics served: nvml.h's id, the key of the activity, the names NVML gives it. */
#define GPM_SERVED 4
static const struct {
    unsigned id;
    size_t offset;
    char *short_name, *long_name;
} GPM_METRICS[GPM_SERVED] = {
    {NVML_GPM_METRIC_SM_UTIL, offsetof(gpu_t, sm_active_percent), "sm_util", "SM utilization"},
    {NVML_GPM_METRIC_SM_OCCUPANCY, offsetof(gpu_t, sm_occupancy_percent), "sm_occupancy",
     "SM occupancy"},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, offsetof(gpu_t, tensor_active_percent), "any_tensor_util",
     "Any tensor utilization"},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, offsetof(gpu_t, dram_active_percent), "dram_bw_util",
     "DRAM bandwidth utilization"},
};

/* A GPM sample: whose, when, and each served metric's activity integral at that time. */
struct nvmlGpmSample_st {
    int taken;
    unsigned gpu;
    unsigned long long at_ns;
    double percent_seconds[GPM_SERVED];
};

typedef struct { unsigned long long id, gpu, code; } xid_t;

struct nvmlEventSet_st {
    unsigned long long registered; /* bit per device index */
    unsigned long long delivered;  /* the highest xid id this set has passed */
};

static gpu_t G[MAX_GPUS];
static unsigned N;
static int DRIVER_NOT_LOADED;
static char BAD[512];                /* why the state file was rejected; "" when it was not */
static char LOADED_PATH[4096];       /* the state file parsed last, and its stat */
static struct stat LOADED_STAT;
static unsigned GENERATION[MAX_GPUS]; /* bumped each time a device is seen lost */
static int WAS_LOST[MAX_GPUS];
static xid_t XIDS[MAX_XIDS];
static double GPM_PERCENT_SECONDS[MAX_GPUS][GPM_SERVED]; /* activity integrated until GPM_AT_NS */
static unsigned long long GPM_AT_NS[MAX_GPUS];
static unsigned NXIDS;
static pthread_mutex_t LOCK = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

static void unlock(int *taken) { if (*taken) pthread_mutex_unlock(&LOCK); }
/* Holds the lock until the enclosing function returns. */
#define LOCKED __attribute__((cleanup(unlock))) int locked_ = !pthread_mutex_lock(&LOCK)

static int parse_number(const char *text, unsigned long long *out) {
    char *end;
    if (*text < '0' || *text > '9') return 0;
    *out = strtoull(text, &end, 10);
    return *end == '\0';
}

static int parse_processes(char *list, gpu_t *g) {
    char *save, *item;
    for (item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *bytes = strchr(item, ':');
        unsigned long long pid;
        if (!bytes || g->nprocs == MAX_PROCS) return 0;
        *bytes++ = '\0';
        if (!parse_number(item, &pid)) return 0;
        if (!strcmp(bytes, "na")) g->used[g->nprocs] = NOT_AVAILABLE;
        else if (!parse_number(bytes, &g->used[g->nprocs])) return 0;
        g->pid[g->nprocs++] = (unsigned)pid;
    }
    return 1;
}

static int parse_nvlinks(char *list, gpu_t *g) {
    char *save, *item;
    for (item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *inner, *value;
        unsigned k = 0;
        if (g->nlinks == NVML_NVLINK_MAX_LINKS) return 0;
        for (value = strtok_r(item, ":", &inner); value; value = strtok_r(NULL, ":", &inner))
            if (k > NVLINK_COUNTERS || !parse_number(value, &g->nvlink[g->nlinks][k++])) return 0;
        if (k != 1 + NVLINK_COUNTERS) return 0;
        g->nlinks++;
    }
    return 1;
}

/* GI:CI:USED:TOTAL[:PID/BYTES+PID/BYTES...] per MIG device. */
static int parse_mig(char *list, gpu_t *g) {
    char *save, *item;
    for (item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        mig_t *m;
        unsigned long long *fields[4];
        char *inner, *value, *procs;
        unsigned k = 0;
        if (g->nmig == MAX_MIG) return 0;
        m = &g->mig[g->nmig];
        fields[0] = &m->gi; fields[1] = &m->ci; fields[2] = &m->used; fields[3] = &m->total;
        for (value = strtok_r(item, ":", &inner); value && k < 4; value = strtok_r(NULL, ":", &inner))
            if (!parse_number(value, fields[k++])) return 0;
        if (k != 4) return 0;
        procs = value;
        if (procs && strtok_r(NULL, ":", &inner)) return 0;
        for (value = procs ? strtok_r(procs, "+", &inner) : NULL; value; value = strtok_r(NULL, "+", &inner)) {
            char *bytes = strchr(value, '/');
            unsigned long long pid;
            if (!bytes || m->nprocs == MAX_MIG_PROCS) return 0;
            *bytes++ = '\0';
            if (!parse_number(value, &pid)) return 0;
            if (!strcmp(bytes, "na")) m->used_by[m->nprocs] = NOT_AVAILABLE;
            else if (!parse_number(bytes, &m->used_by[m->nprocs])) return 0;
            m->pid[m->nprocs++] = (unsigned)pid;
        }
        g->nmig++;
    }
    return 1;
}

static int parse_unsupported(char *list, gpu_t *g) {
    char *save, *item;
    for (item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        int c;
        for (c = 0; c < C_COUNT && strcmp(item, CALL_NAMES[c]); c++) {}
        if (c == C_COUNT) return 0;
        g->unsupported |= 1u << c;
    }
    return 1;
}

static int parse_pair(char *token, gpu_t *g) {
    char *value = strchr(token, '=');
    size_t k;
    if (!value) return 0;
    *value++ = '\0';
    if (!strcmp(token, "processes")) return parse_processes(value, g);
    if (!strcmp(token, "nvlinks")) return parse_nvlinks(value, g);
    if (!strcmp(token, "unsupported")) return parse_unsupported(value, g);
    if (!strcmp(token, "mig")) return parse_mig(value, g);
    for (k = 0; k < sizeof KEYS / sizeof KEYS[0]; k++)
        if (!strcmp(token, KEYS[k].name))
            return parse_number(value, (unsigned long long *)((char *)g + KEYS[k].offset));
    return 0;
}

static int parse_xid(char **save, xid_t *x) {
    char *token;
    int seen = 0;
    while ((token = strtok_r(NULL, " \t", save))) {
        char *value = strchr(token, '=');
        unsigned long long *field;
        if (!value) return 0;
        *value++ = '\0';
        if (!strcmp(token, "id")) field = &x->id;
        else if (!strcmp(token, "gpu")) field = &x->gpu;
        else if (!strcmp(token, "code")) field = &x->code;
        else return 0;
        if (!parse_number(value, field)) return 0;
        seen++;
    }
    return seen == 3;
}

static void reject(const char *path, unsigned line_no, const char *what, const char *token) {
    snprintf(BAD, sizeof BAD, "fake_nvml: %s:%u: %s '%s'", path, line_no, what, token);
}

/* Whether `path` is still the file parsed last: parsing on every call would make each call
 * cost tens of microseconds and swamp what a benchmark over this library measures. */
static int unchanged(const char *path, const struct stat *st) {
    const struct stat *was = &LOADED_STAT;
    return !strcmp(path, LOADED_PATH) && st->st_dev == was->st_dev && st->st_ino == was->st_ino
        && st->st_size == was->st_size && st->st_mtim.tv_sec == was->st_mtim.tv_sec
        && st->st_mtim.tv_nsec == was->st_mtim.tv_nsec && st->st_ctim.tv_sec == was->st_ctim.tv_sec
        && st->st_ctim.tv_nsec == was->st_ctim.tv_nsec;
}

static unsigned long long monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (unsigned long long)now.tv_sec * 1000000000ULL + (unsigned long long)now.tv_nsec;
}

static unsigned long long gpm_rate_percent(const gpu_t *g, unsigned k) {
    return *(const unsigned long long *)((const char *)g + GPM_METRICS[k].offset);
}

/* Integrates device i's activity, at the rates configured now, up to `now_ns`. */
static void gpm_advance(unsigned i, unsigned long long now_ns) {
    unsigned k;
    if (GPM_AT_NS[i])
        for (k = 0; k < GPM_SERVED; k++)
            GPM_PERCENT_SECONDS[i][k] +=
                (double)gpm_rate_percent(&G[i], k) * (double)(now_ns - GPM_AT_NS[i]) / 1e9;
    GPM_AT_NS[i] = now_ns;
}

static void load(void) {
    const char *path = getenv("FAKE_NVML_STATE");
    struct stat st;
    FILE *f;
    char line[8192];
    unsigned line_no = 0, i;
    if (!path || stat(path, &st) != 0) {
        for (i = 0; i < N; i++) gpm_advance(i, monotonic_ns());
        N = 0; DRIVER_NOT_LOADED = 0; BAD[0] = '\0'; LOADED_PATH[0] = '\0';
        return;
    }
    if (unchanged(path, &st)) return;
    /* The activity so far was at the old rates: count it before they change. */
    for (i = 0; i < N; i++) gpm_advance(i, monotonic_ns());
    N = 0; NXIDS = 0; DRIVER_NOT_LOADED = 0; BAD[0] = '\0';
    /* A path too long to remember is parsed on every call. */
    if (snprintf(LOADED_PATH, sizeof LOADED_PATH, "%s", path) >= (int)sizeof LOADED_PATH)
        LOADED_PATH[0] = '\0';
    LOADED_STAT = st;
    if (!(f = fopen(path, "r"))) return;
    while (!BAD[0] && fgets(line, sizeof line, f)) {
        char *save, *token;
        size_t len = strlen(line);
        line_no++;
        if (len == sizeof line - 1 && line[len - 1] != '\n') { reject(path, line_no, "line too long", ""); break; }
        line[strcspn(line, "\r\n")] = '\0';
        token = strtok_r(line, " \t", &save);
        if (!token || token[0] == '#') continue;
        if (!strcmp(token, "driver_not_loaded")) { DRIVER_NOT_LOADED = 1; continue; }
        if (!strcmp(token, "xid")) {
            if (NXIDS == MAX_XIDS) { reject(path, line_no, "too many xid lines", ""); break; }
            memset(&XIDS[NXIDS], 0, sizeof XIDS[NXIDS]);
            if (!parse_xid(&save, &XIDS[NXIDS])) { reject(path, line_no, "expected id=N gpu=I code=C in", "xid"); break; }
            NXIDS++;
            continue;
        }
        if (strcmp(token, "gpu")) { reject(path, line_no, "expected gpu or driver_not_loaded, not", token); break; }
        if (N == MAX_GPUS) { reject(path, line_no, "too many GPUs", ""); break; }
        memset(&G[N], 0, sizeof G[N]);
        while ((token = strtok_r(NULL, " \t", &save)))
            if (!parse_pair(token, &G[N])) { reject(path, line_no, "bad value or unknown key", token); break; }
        N++;
    }
    fclose(f);
    if (BAD[0]) {
        N = 0; NXIDS = 0;
        fprintf(stderr, "%s\n", BAD);
        return;
    }
    for (i = 0; i < N; i++) {
        int lost = G[i].lost != 0;
        if (lost && !WAS_LOST[i]) GENERATION[i]++;
        WAS_LOST[i] = lost;
    }
}

static void log_call(const char *symbol) {
    const char *path = getenv("FAKE_NVML_CALLS");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (!f) return;
    fputs(symbol, f);
    fputc('\n', f);
    fclose(f);
}

static nvmlDevice_t make_handle(unsigned i) {
    return (nvmlDevice_t)(((uintptr_t)GENERATION[i] << 8) | (i + 1));
}

static nvmlDevice_t make_mig_handle(unsigned i, unsigned slot) {
    return (nvmlDevice_t)((uintptr_t)make_handle(i) | ((uintptr_t)(slot + 1) << MIG_SHIFT));
}

/* The MIG device the handle of the call being answered names; NULL for a whole GPU. Set by
 * device_call, read under the lock. */
static mig_t *MIG;

/* What every call checks before it answers: the log, the state file, the driver. */
static nvmlReturn_t system_call(const char *symbol) {
    log_call(symbol);
    load();
    if (BAD[0]) return NVML_ERROR_UNKNOWN;
    return DRIVER_NOT_LOADED ? NVML_ERROR_DRIVER_NOT_LOADED : NVML_SUCCESS;
}

/* ... and a device call: the handle, loss, support. */
static nvmlReturn_t device_call(const char *symbol, nvmlDevice_t d, int call, gpu_t **g) {
    uintptr_t h = (uintptr_t)d;
    unsigned i = (unsigned)(h & 0xff) - 1;
    unsigned slot = (unsigned)(h >> MIG_SHIFT & 0xff);
    nvmlReturn_t rc = system_call(symbol);
    MIG = NULL;
    if (rc != NVML_SUCCESS) return rc;
    if (i >= N) return NVML_ERROR_INVALID_ARGUMENT;
    if (G[i].lost || (h >> 8 & GENERATION_MASK) != GENERATION[i]) return NVML_ERROR_GPU_IS_LOST;
    if (call != C_ALWAYS && (G[i].unsupported >> call & 1u)) return NVML_ERROR_NOT_SUPPORTED;
    /* A MIG device that a reconfiguration removed is no device any more. */
    if (slot && (!G[i].mig_mode || slot > G[i].nmig)) return NVML_ERROR_INVALID_ARGUMENT;
    MIG = slot ? &G[i].mig[slot - 1] : NULL;
    *g = &G[i];
    return NVML_SUCCESS;
}

#define DEVICE_CALL(d, call)                                   \
    LOCKED;                                                    \
    gpu_t *g;                                                  \
    nvmlReturn_t rc_ = device_call(__func__, (d), (call), &g); \
    if (rc_ != NVML_SUCCESS) return rc_

static unsigned device_index(const gpu_t *g) { return (unsigned)(g - G); }

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    LOCKED;
    (void)flags;
    return system_call(__func__);
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    LOCKED;
    log_call(__func__);
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    LOCKED;
    nvmlReturn_t rc = system_call(__func__);
    if (rc != NVML_SUCCESS) return rc;
    snprintf(version, length, "999.99-fake");
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    LOCKED;
    nvmlReturn_t rc = system_call(__func__);
    if (rc != NVML_SUCCESS) return rc;
    *count = N;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    LOCKED;
    nvmlReturn_t rc = system_call(__func__);
    if (rc != NVML_SUCCESS) return rc;
    if (index >= N) return NVML_ERROR_INVALID_ARGUMENT;
    if (G[index].lost) return NVML_ERROR_GPU_IS_LOST;
    *device = make_handle(index);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
    DEVICE_CALL(d, C_ALWAYS);
    snprintf(name, length, "NVIDIA H200 (fake)");
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
    DEVICE_CALL(d, C_ALWAYS);
    if (MIG)
        snprintf(uuid, length, "MIG-00000000-0000-0000-%04u-%012u", (unsigned)(MIG - g->mig) + 1,
                 device_index(g));
    else
        snprintf(uuid, length, "GPU-00000000-0000-0000-0000-%012u", device_index(g));
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci) {
    DEVICE_CALL(d, C_ALWAYS);
    memset(pci, 0, sizeof *pci);
    pci->bus = device_index(g) + 1;
    pci->pciDeviceId = 0x233510DE; /* H200 */
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *memory) {
    DEVICE_CALL(d, C_MEMORY);
    if (MIG) {
        memory->total = MIG->total;
        memory->used = MIG->used;
        memory->free = MIG->total - MIG->used;
        return NVML_SUCCESS;
    }
    memory->total = g->memory_total_bytes;
    memory->used = g->memory_used_bytes;
    memory->free = g->memory_total_bytes - g->memory_used_bytes;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *utilization) {
    DEVICE_CALL(d, C_UTILIZATION);
    utilization->gpu = (unsigned)g->utilization_gpu_percent;
    utilization->memory = (unsigned)g->utilization_memory_percent;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                     nvmlProcessInfo_t *infos) {
    unsigned k, m, n = 0;
    DEVICE_CALL(d, C_PROCESSES);
    if (MIG || g->mig_mode) {
        /* A MIG device lists its own processes; the GPU lists those of all its MIG devices,
         * with their instance ids but not their memory (as NVML does to a non-MIG query). */
        mig_t *first = MIG ? MIG : g->mig, *last = MIG ? MIG + 1 : g->mig + g->nmig;
        for (const mig_t *x = first; x < last; x++) n += x->nprocs;
        if (*count < n) {
            *count = n;
            return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        *count = n;
        for (n = 0; first < last; first++)
            for (m = 0; m < first->nprocs; m++, n++) {
                infos[n].pid = first->pid[m];
                infos[n].usedGpuMemory = MIG ? first->used_by[m] : NOT_AVAILABLE;
                infos[n].gpuInstanceId = (unsigned)first->gi;
                infos[n].computeInstanceId = (unsigned)first->ci;
            }
        return NVML_SUCCESS;
    }
    if (*count < g->nprocs) {
        *count = g->nprocs;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = g->nprocs;
    for (k = 0; k < g->nprocs; k++) {
        infos[k].pid = g->pid[k];
        infos[k].usedGpuMemory = g->used[k];
        infos[k].gpuInstanceId = 0xFFFFFFFFu; /* MIG off */
        infos[k].computeInstanceId = 0xFFFFFFFFu;
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *milliwatts) {
    DEVICE_CALL(d, C_POWER);
    *milliwatts = (unsigned)g->power_milliwatts;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, nvmlTemperatureSensors_t sensor,
                                      unsigned int *celsius) {
    DEVICE_CALL(d, C_TEMPERATURE);
    if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_NOT_SUPPORTED;
    *celsius = (unsigned)g->temperature_celsius;
    return NVML_SUCCESS;
}

/* The graphics clock is the SM clock on an H200; memory and video are fixed, as the recorded
 * H200 answered them (tests/fixtures/nvml/h200-trace). Only the SM clock can be unsupported. */
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned int *mhz) {
    DEVICE_CALL(d, type == NVML_CLOCK_SM ? C_SM_CLOCK : C_ALWAYS);
    switch (type) {
    case NVML_CLOCK_SM:
    case NVML_CLOCK_GRAPHICS: *mhz = (unsigned)g->sm_clock_mhz; return NVML_SUCCESS;
    case NVML_CLOCK_MEM: *mhz = 3201; return NVML_SUCCESS;
    case NVML_CLOCK_VIDEO: *mhz = 765; return NVML_SUCCESS;
    default: return NVML_ERROR_INVALID_ARGUMENT;
    }
}

/* pynvml calls the EventReasons symbol when it has it, older ones the ThrottleReasons one. */
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *reasons) {
    DEVICE_CALL(d, C_CLOCK_EVENT_REASONS);
    *reasons = g->clock_event_reasons;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *reasons) {
    DEVICE_CALL(d, C_CLOCK_EVENT_REASONS);
    *reasons = g->clock_event_reasons;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t d, nvmlPstates_t *state) {
    DEVICE_CALL(d, C_PERFORMANCE_STATE);
    *state = (nvmlPstates_t)g->performance_state;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, nvmlMemoryErrorType_t type,
                                         nvmlEccCounterType_t counter, unsigned long long *count) {
    DEVICE_CALL(d, counter == NVML_AGGREGATE_ECC ? C_ECC_AGGREGATE_UNCORRECTED
                                                 : C_ECC_VOLATILE_UNCORRECTED);
    if (type != NVML_MEMORY_ERROR_TYPE_UNCORRECTED) return NVML_ERROR_NOT_SUPPORTED;
    *count = counter == NVML_AGGREGATE_ECC ? g->ecc_aggregate_uncorrected_errors
                                           : g->ecc_volatile_uncorrected_errors;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *millijoules) {
    DEVICE_CALL(d, C_ENERGY);
    *millijoules = g->energy_millijoules;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, nvmlPcieUtilCounter_t counter,
                                         unsigned int *kilobytes_per_second) {
    int rx = counter == NVML_PCIE_UTIL_RX_BYTES;
    DEVICE_CALL(d, rx ? C_PCIE_RX : C_PCIE_TX);
    if (!rx && counter != NVML_PCIE_UTIL_TX_BYTES) return NVML_ERROR_INVALID_ARGUMENT;
    *kilobytes_per_second =
        (unsigned)(rx ? g->pcie_rx_kilobytes_per_second : g->pcie_tx_kilobytes_per_second);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int *correctable,
                                       unsigned int *uncorrectable, unsigned int *pending,
                                       unsigned int *failed) {
    DEVICE_CALL(d, C_REMAPPED_ROWS);
    *correctable = (unsigned)g->remapped_rows_correctable;
    *uncorrectable = (unsigned)g->remapped_rows_uncorrectable;
    *pending = g->remapped_rows_pending != 0;
    *failed = g->remapped_rows_failed != 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, nvmlPageRetirementCause_t cause,
                                       unsigned int *count, unsigned long long *addresses) {
    unsigned long long pages;
    unsigned k;
    DEVICE_CALL(d, C_RETIRED_PAGES);
    if (cause == NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
        pages = g->retired_pages_single_bit;
    else if (cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        pages = g->retired_pages_double_bit;
    else
        return NVML_ERROR_INVALID_ARGUMENT;
    if (*count < pages) {
        *count = (unsigned)pages;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = (unsigned)pages;
    for (k = 0; k < pages; k++) addresses[k] = 0x100000ULL * (k + 1) + (unsigned)cause;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t *values) {
    int k;
    DEVICE_CALL(d, C_ALWAYS); /* support is per field, in each value's nvmlReturn */
    for (k = 0; k < count; k++) {
        nvmlFieldValue_t *v = &values[k];
        v->timestamp = 0;
        v->latencyUsec = 0;
        if (v->fieldId != NVML_FI_DEV_PCIE_REPLAY_COUNTER || (g->unsupported >> C_PCIE_REPLAY & 1u)) {
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            continue;
        }
        v->nvmlReturn = NVML_SUCCESS;
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        v->value.uiVal = (unsigned)g->pcie_replay_errors;
    }
    return NVML_SUCCESS;
}

/* Calls the observer never makes, which nvitop-exporter makes every interval (so that
 * bench/agent_sampling.py measures it on the same library); the answers are an H200's. */

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    LOCKED;
    nvmlReturn_t rc = system_call(__func__);
    if (rc != NVML_SUCCESS) return rc;
    *version = 13000; /* CUDA 13.0 */
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    LOCKED;
    nvmlReturn_t rc = system_call(__func__);
    if (rc != NVML_SUCCESS) return rc;
    *version = 13000;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending) {
    DEVICE_CALL(d, C_MIG);
    if (MIG) return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = g->mig_mode ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *count) {
    DEVICE_CALL(d, C_MIG);
    if (MIG) return NVML_ERROR_NOT_SUPPORTED;
    *count = MAX_MIG;
    return NVML_SUCCESS;
}

/* An index no MIG device holds answers NOT_FOUND, as on a partly partitioned GPU. */
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int index,
                                                 nvmlDevice_t *mig) {
    DEVICE_CALL(d, C_MIG);
    if (MIG || !g->mig_mode || index >= MAX_MIG) return NVML_ERROR_INVALID_ARGUMENT;
    if (index >= g->nmig) return NVML_ERROR_NOT_FOUND;
    *mig = make_mig_handle(device_index(g), index);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned int *id) {
    DEVICE_CALL(d, C_MIG);
    if (!MIG) return NVML_ERROR_INVALID_ARGUMENT;
    *id = (unsigned)MIG->gi;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned int *id) {
    DEVICE_CALL(d, C_MIG);
    if (!MIG) return NVML_ERROR_INVALID_ARGUMENT;
    *id = (unsigned)MIG->ci;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t d, unsigned int *milliwatts) {
    DEVICE_CALL(d, C_ALWAYS);
    *milliwatts = 700000;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t d, unsigned int *percent) {
    DEVICE_CALL(d, C_ALWAYS);
    (void)g;
    (void)percent;
    return NVML_ERROR_NOT_SUPPORTED; /* an SXM module has no fan of its own */
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t d, unsigned int *percent,
                                             unsigned int *sampling_period_us) {
    DEVICE_CALL(d, C_ALWAYS);
    (void)g;
    *percent = 0;
    *sampling_period_us = 167000;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t d, unsigned int *percent,
                                             unsigned int *sampling_period_us) {
    DEVICE_CALL(d, C_ALWAYS);
    (void)g;
    *percent = 0;
    *sampling_period_us = 167000;
    return NVML_SUCCESS;
}

/* A compute node: no graphics processes. */
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                      nvmlProcessInfo_t *infos) {
    DEVICE_CALL(d, C_ALWAYS);
    (void)g;
    (void)infos;
    *count = 0;
    return NVML_SUCCESS;
}

/* One sample per compute process, stamped now, sharing the device's utilization; NOT_FOUND
 * without processes. A NULL buffer or a short one answers INSUFFICIENT_SIZE with the count. */
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t *samples,
                                             unsigned int *count, unsigned long long last_seen_us) {
    struct timespec now;
    unsigned long long now_us;
    unsigned k;
    DEVICE_CALL(d, C_ALWAYS);
    clock_gettime(CLOCK_REALTIME, &now);
    now_us = (unsigned long long)now.tv_sec * 1000000ULL + (unsigned long long)now.tv_nsec / 1000;
    if (!g->nprocs || now_us <= last_seen_us) return NVML_ERROR_NOT_FOUND;
    if (!samples || *count < g->nprocs) {
        *count = g->nprocs;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = g->nprocs;
    for (k = 0; k < g->nprocs; k++) {
        samples[k].pid = g->pid[k];
        samples[k].timeStamp = now_us;
        samples[k].smUtil = (unsigned)(g->utilization_gpu_percent / g->nprocs);
        samples[k].memUtil = (unsigned)(g->utilization_memory_percent / g->nprocs);
        samples[k].encUtil = samples[k].decUtil = 0;
    }
    return NVML_SUCCESS;
}

/* The link of an NVLink call: NOT_SUPPORTED without NVLink, INVALID_ARGUMENT past the last. */
static nvmlReturn_t nvlink_of(const gpu_t *g, unsigned link) {
    if (!g->nlinks) return NVML_ERROR_NOT_SUPPORTED;
    return link < g->nlinks ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, nvmlEnableState_t *isActive) {
    nvmlReturn_t rc;
    DEVICE_CALL(d, C_NVLINK_ERRORS);
    if ((rc = nvlink_of(g, link)) != NVML_SUCCESS) return rc;
    *isActive = g->nvlink[link][0] ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t d, unsigned int link,
                                             nvmlNvLinkErrorCounter_t counter,
                                             unsigned long long *counterValue) {
    nvmlReturn_t rc;
    DEVICE_CALL(d, C_NVLINK_ERRORS);
    if ((rc = nvlink_of(g, link)) != NVML_SUCCESS) return rc;
    if ((unsigned)counter >= NVLINK_COUNTERS) return NVML_ERROR_NOT_SUPPORTED; /* ECC_DATA */
    *counterValue = g->nvlink[link][1 + counter];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, nvmlEnableState_t *pending) {
    DEVICE_CALL(d, C_RETIRED_PAGES_PENDING);
    *pending = g->retired_pages_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long *types) {
    DEVICE_CALL(d, C_ALWAYS);
    *types = nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError
        | nvmlEventTypePState | nvmlEventTypeClock;
    if (!(g->unsupported >> C_XID_EVENTS & 1u)) *types |= nvmlEventTypeXidCriticalError;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    LOCKED;
    unsigned k;
    nvmlReturn_t rc = system_call(__func__);
    if (rc != NVML_SUCCESS) return rc;
    if (!(*set = calloc(1, sizeof **set))) return NVML_ERROR_MEMORY;
    for (k = 0; k < NXIDS; k++) /* only what happens after it exists */
        if (XIDS[k].id > (*set)->delivered) (*set)->delivered = XIDS[k].id;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    LOCKED;
    log_call(__func__);
    free(set);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set) {
    DEVICE_CALL(d, C_XID_EVENTS);
    if (types != (unsigned long long)nvmlEventTypeXidCriticalError) return NVML_ERROR_NOT_SUPPORTED;
    set->registered |= 1ULL << device_index(g);
    return NVML_SUCCESS;
}

/* One look at the queue: the first xid past the set's cursor on a registered device. */
static int next_xid(nvmlEventSet_t set, nvmlEventData_t *data) {
    unsigned k;
    for (k = 0; k < NXIDS; k++) {
        xid_t *x = &XIDS[k];
        if (x->id <= set->delivered) continue;
        set->delivered = x->id;
        if (x->gpu >= N || !(set->registered >> x->gpu & 1ULL)) continue;
        memset(data, 0, sizeof *data);
        data->device = make_handle((unsigned)x->gpu);
        data->eventType = nvmlEventTypeXidCriticalError;
        data->eventData = x->code;
        data->gpuInstanceId = 0xFFFFFFFFu; /* MIG off */
        data->computeInstanceId = 0xFFFFFFFFu;
        return 1;
    }
    return 0;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    const struct timespec tick = {0, 2000000};
    unsigned waited = 0;
    for (;;) {
        pthread_mutex_lock(&LOCK);
        nvmlReturn_t rc = system_call(__func__);
        int found = rc == NVML_SUCCESS && next_xid(set, data);
        pthread_mutex_unlock(&LOCK);
        if (rc != NVML_SUCCESS) return rc;
        if (found) return NVML_SUCCESS;
        if (waited >= timeoutms) return NVML_ERROR_TIMEOUT;
        nanosleep(&tick, NULL);
        waited += 2;
    }
}

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t d, nvmlGpmSupport_t *support) {
    DEVICE_CALL(d, C_ALWAYS); /* an older GPU answers the query: "not supported" */
    if (!support) return NVML_ERROR_INVALID_ARGUMENT;
    if (support->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    support->isSupportedDevice = !(g->unsupported >> C_GPM & 1u);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *sample) {
    LOCKED;
    nvmlReturn_t rc = system_call(__func__);
    if (rc != NVML_SUCCESS) return rc;
    if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
    return (*sample = calloc(1, sizeof **sample)) ? NVML_SUCCESS : NVML_ERROR_MEMORY;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
    LOCKED;
    log_call(__func__);
    if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
    free(sample);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t d, nvmlGpmSample_t sample) {
    unsigned i, k;
    DEVICE_CALL(d, C_GPM);
    if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
    i = device_index(g);
    gpm_advance(i, monotonic_ns());
    sample->taken = 1;
    sample->gpu = i;
    sample->at_ns = GPM_AT_NS[i];
    for (k = 0; k < GPM_SERVED; k++) sample->percent_seconds[k] = GPM_PERCENT_SECONDS[i][k];
    return NVML_SUCCESS;
}

/* The mean activity between two samples of one device, sample1 the earlier. */
nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *get) {
    LOCKED;
    const struct nvmlGpmSample_st *first, *second;
    double seconds;
    unsigned m, k;
    nvmlReturn_t rc = system_call(__func__);
    if (rc != NVML_SUCCESS) return rc;
    if (!get) return NVML_ERROR_INVALID_ARGUMENT;
    if (get->version != NVML_GPM_METRICS_GET_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    first = get->sample1;
    second = get->sample2;
    if (get->numMetrics > NVML_GPM_METRIC_MAX || !first || !second || !first->taken
        || !second->taken || first->gpu != second->gpu || second->at_ns <= first->at_ns)
        return NVML_ERROR_INVALID_ARGUMENT;
    seconds = (double)(second->at_ns - first->at_ns) / 1e9;
    for (m = 0; m < get->numMetrics; m++) {
        nvmlGpmMetric_t *metric = &get->metrics[m];
        for (k = 0; k < GPM_SERVED && GPM_METRICS[k].id != metric->metricId; k++) {}
        metric->value = 0;
        memset(&metric->metricInfo, 0, sizeof metric->metricInfo);
        if (k == GPM_SERVED) {
            metric->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            continue;
        }
        metric->nvmlReturn = NVML_SUCCESS;
        metric->value = (second->percent_seconds[k] - first->percent_seconds[k]) / seconds;
        metric->metricInfo.shortName = GPM_METRICS[k].short_name;
        metric->metricInfo.longName = GPM_METRICS[k].long_name;
        metric->metricInfo.unit = "%";
    }
    return NVML_SUCCESS;
}
