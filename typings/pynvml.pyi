"""Types for the parts of nvidia-ml-py's pynvml (13.x) the observer uses: observer.gpu.nvml's calls,
the event-set API for Xid events and GPM's samples and metrics.

Functions return what pynvml's wrappers return: ctypes values as int, strings decoded to str,
and structs whose fields read as Python values (_PrintableStructure decodes char arrays).
"""

from collections.abc import Iterator, Mapping, Sequence
from ctypes import Array, Structure, Union, _Pointer
from typing import ClassVar, Final, Self, TypeAlias, overload

NVML_SUCCESS: Final = 0
NVML_ERROR_UNINITIALIZED: Final = 1
NVML_ERROR_INVALID_ARGUMENT: Final = 2
NVML_ERROR_NOT_SUPPORTED: Final = 3
NVML_ERROR_NO_PERMISSION: Final = 4
NVML_ERROR_ALREADY_INITIALIZED: Final = 5
NVML_ERROR_NOT_FOUND: Final = 6
NVML_ERROR_INSUFFICIENT_SIZE: Final = 7
NVML_ERROR_INSUFFICIENT_POWER: Final = 8
NVML_ERROR_DRIVER_NOT_LOADED: Final = 9
NVML_ERROR_TIMEOUT: Final = 10
NVML_ERROR_IRQ_ISSUE: Final = 11
NVML_ERROR_LIBRARY_NOT_FOUND: Final = 12
NVML_ERROR_FUNCTION_NOT_FOUND: Final = 13
NVML_ERROR_CORRUPTED_INFOROM: Final = 14
NVML_ERROR_GPU_IS_LOST: Final = 15
NVML_ERROR_RESET_REQUIRED: Final = 16
NVML_ERROR_OPERATING_SYSTEM: Final = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH: Final = 18
NVML_ERROR_IN_USE: Final = 19
NVML_ERROR_MEMORY: Final = 20
NVML_ERROR_NO_DATA: Final = 21
NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: Final = 22
NVML_ERROR_INSUFFICIENT_RESOURCES: Final = 23
NVML_ERROR_FREQ_NOT_SUPPORTED: Final = 24
NVML_ERROR_ARGUMENT_VERSION_MISMATCH: Final = 25
NVML_ERROR_DEPRECATED: Final = 26
NVML_ERROR_NOT_READY: Final = 27
NVML_ERROR_GPU_NOT_FOUND: Final = 28
NVML_ERROR_INVALID_STATE: Final = 29
NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: Final = 30
NVML_ERROR_UNKNOWN: Final = 999

NVML_TEMPERATURE_GPU: Final = 0
NVML_CLOCK_SM: Final = 1
NVML_MEMORY_ERROR_TYPE_UNCORRECTED: Final = 1
NVML_VOLATILE_ECC: Final = 0
NVML_AGGREGATE_ECC: Final = 1
NVML_FEATURE_ENABLED: Final = 1
NVML_PCIE_UTIL_TX_BYTES: Final = 0
NVML_PCIE_UTIL_RX_BYTES: Final = 1
NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS: Final = 0
NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR: Final = 1
NVML_NVLINK_MAX_LINKS: Final = 36
NVML_NVLINK_ERROR_DL_REPLAY: Final = 0
NVML_NVLINK_ERROR_DL_RECOVERY: Final = 1
NVML_NVLINK_ERROR_DL_CRC_FLIT: Final = 2
NVML_NVLINK_ERROR_DL_CRC_DATA: Final = 3
nvmlEventTypeXidCriticalError: Final = 0x0000000000000008
NVML_GPM_METRIC_SM_UTIL: Final = 2
NVML_GPM_METRIC_SM_OCCUPANCY: Final = 3
NVML_GPM_METRIC_ANY_TENSOR_UTIL: Final = 5
NVML_GPM_METRIC_DRAM_BW_UTIL: Final = 10
NVML_GPM_METRIC_MAX: Final = 477
NVML_GPM_METRICS_GET_VERSION: Final = 1

class NVMLError(Exception):
    value: int
    # NVMLError(code) returns the subclass registered for the code.
    def __new__(typ, value: int) -> Self: ...
    def __eq__(self, other: object) -> bool: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]

# One subclass per NVML_ERROR_* code; each ignores its arguments and carries its own code.
class NVMLError_Uninitialized(NVMLError): ...
class NVMLError_InvalidArgument(NVMLError): ...
class NVMLError_NotSupported(NVMLError): ...
class NVMLError_NoPermission(NVMLError): ...
class NVMLError_AlreadyInitialized(NVMLError): ...
class NVMLError_NotFound(NVMLError): ...
class NVMLError_InsufficientSize(NVMLError): ...
class NVMLError_InsufficientPower(NVMLError): ...
class NVMLError_DriverNotLoaded(NVMLError): ...
class NVMLError_Timeout(NVMLError): ...
class NVMLError_IrqIssue(NVMLError): ...
class NVMLError_LibraryNotFound(NVMLError): ...
class NVMLError_FunctionNotFound(NVMLError): ...
class NVMLError_CorruptedInforom(NVMLError): ...
class NVMLError_GpuIsLost(NVMLError): ...
class NVMLError_ResetRequired(NVMLError): ...
class NVMLError_OperatingSystem(NVMLError): ...
class NVMLError_LibRmVersionMismatch(NVMLError): ...
class NVMLError_InUse(NVMLError): ...
class NVMLError_Memory(NVMLError): ...
class NVMLError_NoData(NVMLError): ...
class NVMLError_VgpuEccNotSupported(NVMLError): ...
class NVMLError_InsufficientResources(NVMLError): ...
class NVMLError_FreqNotSupported(NVMLError): ...
class NVMLError_ArgumentVersionMismatch(NVMLError): ...
class NVMLError_Deprecated(NVMLError): ...
class NVMLError_NotReady(NVMLError): ...
class NVMLError_GpuNotFound(NVMLError): ...
class NVMLError_InvalidState(NVMLError): ...
class NVMLError_ResetTypeNotSupported(NVMLError): ...
class NVMLError_Unknown(NVMLError): ...

# Raised instead of NVMLError_FunctionNotFound by unversioned calls such as
# nvmlDeviceGetComputeRunningProcesses when the library lacks the versioned symbol.
class NVMLLibraryMismatchError(Exception): ...
class _PrintableStructure(Structure): ...
class struct_c_nvmlDevice_t(Structure): ...

c_nvmlDevice_t: TypeAlias = _Pointer[struct_c_nvmlDevice_t]

class struct_c_nvmlEventSet_t(Structure): ...

c_nvmlEventSet_t: TypeAlias = _Pointer[struct_c_nvmlEventSet_t]

class struct_c_nvmlGpmSample_t(Structure): ...

c_nvmlGpmSample_t: TypeAlias = _Pointer[struct_c_nvmlGpmSample_t]

class c_metricInfo_t(Structure):
    shortName: bytes | None
    longName: bytes | None
    unit: bytes | None

class c_nvmlGpmMetric_t(_PrintableStructure):
    metricId: int
    nvmlReturn: int
    value: float
    metricInfo: c_metricInfo_t

# Stub-only: the `c_nvmlGpmMetric_t * NVML_GPM_METRIC_MAX` array of c_nvmlGpmMetricsGet_t.
class _GpmMetricArray(Array[c_nvmlGpmMetric_t]):
    _length_: int
    _type_: type[c_nvmlGpmMetric_t]
    @overload
    def __getitem__(self, key: int, /) -> c_nvmlGpmMetric_t: ...
    @overload
    def __getitem__(self, key: slice, /) -> list[c_nvmlGpmMetric_t]: ...
    def __iter__(self) -> Iterator[c_nvmlGpmMetric_t]: ...

class c_nvmlGpmMetricsGet_t(_PrintableStructure):
    version: int
    numMetrics: int
    sample1: c_nvmlGpmSample_t
    sample2: c_nvmlGpmSample_t
    metrics: _GpmMetricArray

class c_nvmlGpmSupport_t(_PrintableStructure):
    version: int
    isSupportedDevice: int

class nvmlPciInfo_t(_PrintableStructure):
    busIdLegacy: str
    domain: int
    bus: int
    device: int
    pciDeviceId: int
    pciSubSystemId: int
    busId: str

class c_nvmlMemory_t(_PrintableStructure):
    total: int
    free: int
    used: int

class c_nvmlMemory_v2_t(_PrintableStructure):
    version: int
    total: int
    reserved: int
    free: int
    used: int
    l2Cache: int
    deviceMemory: int
    registerFile: int

class c_nvmlUtilization_t(_PrintableStructure):
    gpu: int
    memory: int

class c_nvmlValue_t(Union):
    dVal: float
    uiVal: int
    ulVal: int
    ullVal: int
    sllVal: int
    siVal: int
    usVal: int

class c_nvmlFieldValue_t(_PrintableStructure):
    fieldId: int
    scopeId: int
    timestamp: int
    latencyUsec: int
    valueType: int  # an nvmlValueType_t: which member of `value` holds the reading
    nvmlReturn: int
    value: c_nvmlValue_t

class c_nvmlEventData_t(_PrintableStructure):
    device: c_nvmlDevice_t
    eventType: int
    eventData: int
    gpuInstanceId: int
    computeInstanceId: int

class nvmlFriendlyObject:
    def __init__(self, dictionary: Mapping[str, object]) -> None: ...

# Stub-only: the nvmlFriendlyObject made from a c_nvmlProcessInfo_v3_t, whose usedGpuMemory is
# None where NVML cannot attribute memory to the process.
class _ProcessInfo(nvmlFriendlyObject):
    pid: int
    usedGpuMemory: int | None
    gpuInstanceId: int
    computeInstanceId: int

# Stub-only: the `c_nvmlFieldValue_t * n` array type nvmlDeviceGetFieldValues returns.
class _FieldValueArray(Array[c_nvmlFieldValue_t]):
    _length_: int
    _type_: type[c_nvmlFieldValue_t]
    @overload
    def __getitem__(self, key: int, /) -> c_nvmlFieldValue_t: ...
    @overload
    def __getitem__(self, key: slice, /) -> list[c_nvmlFieldValue_t]: ...
    def __iter__(self) -> Iterator[c_nvmlFieldValue_t]: ...

def nvmlInit() -> None: ...
def nvmlShutdown() -> None: ...
def nvmlSystemGetDriverVersion() -> str: ...
def nvmlDeviceGetCount() -> int: ...
def nvmlDeviceGetHandleByIndex(index: int) -> c_nvmlDevice_t: ...
def nvmlDeviceGetUUID(handle: c_nvmlDevice_t) -> str: ...
def nvmlDeviceGetName(handle: c_nvmlDevice_t) -> str: ...
def nvmlDeviceGetPciInfo(handle: c_nvmlDevice_t) -> nvmlPciInfo_t: ...
@overload
def nvmlDeviceGetMemoryInfo(handle: c_nvmlDevice_t, version: None = None) -> c_nvmlMemory_t: ...
@overload
def nvmlDeviceGetMemoryInfo(handle: c_nvmlDevice_t, version: int) -> c_nvmlMemory_v2_t: ...
def nvmlDeviceGetUtilizationRates(handle: c_nvmlDevice_t) -> c_nvmlUtilization_t: ...
def nvmlDeviceGetComputeRunningProcesses(handle: c_nvmlDevice_t) -> list[_ProcessInfo]: ...

# MIG: the mode ([current, pending], NVML_DEVICE_MIG_ENABLE when on) and the MIG devices of a
# GPU, each a handle of its own that the calls above take.
NVML_DEVICE_MIG_ENABLE: Final = 1

def nvmlDeviceGetMigMode(device: c_nvmlDevice_t) -> list[int]: ...
def nvmlDeviceGetMaxMigDeviceCount(device: c_nvmlDevice_t) -> int: ...
def nvmlDeviceGetMigDeviceHandleByIndex(device: c_nvmlDevice_t, index: int) -> c_nvmlDevice_t: ...
def nvmlDeviceGetGpuInstanceId(device: c_nvmlDevice_t) -> int: ...
def nvmlDeviceGetComputeInstanceId(device: c_nvmlDevice_t) -> int: ...
def nvmlDeviceGetPowerUsage(handle: c_nvmlDevice_t) -> int: ...
def nvmlDeviceGetTemperature(handle: c_nvmlDevice_t, sensor: int) -> int: ...
def nvmlDeviceGetClockInfo(handle: c_nvmlDevice_t, type: int) -> int: ...
def nvmlDeviceGetCurrentClocksEventReasons(handle: c_nvmlDevice_t) -> int: ...
def nvmlDeviceGetCurrentClocksThrottleReasons(handle: c_nvmlDevice_t) -> int: ...
def nvmlDeviceGetPerformanceState(handle: c_nvmlDevice_t) -> int: ...
def nvmlDeviceGetTotalEccErrors(
    handle: c_nvmlDevice_t, errorType: int, counterType: int
) -> int: ...
def nvmlDeviceGetTotalEnergyConsumption(handle: c_nvmlDevice_t) -> int: ...
def nvmlDeviceGetPcieThroughput(device: c_nvmlDevice_t, counter: int) -> int: ...
def nvmlDeviceGetRemappedRows(device: c_nvmlDevice_t) -> tuple[int, int, int, int]: ...
def nvmlDeviceGetRetiredPages(device: c_nvmlDevice_t, sourceFilter: int) -> list[int]: ...
def nvmlDeviceGetRetiredPagesPendingStatus(device: c_nvmlDevice_t) -> int: ...
def nvmlDeviceGetSupportedEventTypes(handle: c_nvmlDevice_t) -> int: ...

# An nvmlEnableState_t: NVML_FEATURE_ENABLED while the link is active.
def nvmlDeviceGetNvLinkState(device: c_nvmlDevice_t, link: int) -> int: ...
def nvmlDeviceGetNvLinkErrorCounter(device: c_nvmlDevice_t, link: int, counter: int) -> int: ...

# A field id, or (field id, scope id).
def nvmlDeviceGetFieldValues(
    handle: c_nvmlDevice_t, fieldIds: Sequence[int | tuple[int, int]]
) -> _FieldValueArray: ...
def nvmlEventSetCreate() -> c_nvmlEventSet_t: ...
def nvmlDeviceRegisterEvents(
    handle: c_nvmlDevice_t, eventTypes: int, eventSet: c_nvmlEventSet_t
) -> None: ...

# Raises NVMLError_Timeout when no event arrives within timeoutms.
def nvmlEventSetWait_v2(eventSet: c_nvmlEventSet_t, timeoutms: int) -> c_nvmlEventData_t: ...
def nvmlEventSetFree(eventSet: c_nvmlEventSet_t) -> None: ...
def nvmlGpmQueryDeviceSupport(device: c_nvmlDevice_t) -> c_nvmlGpmSupport_t: ...
def nvmlGpmSampleAlloc() -> c_nvmlGpmSample_t: ...
def nvmlGpmSampleFree(gpmSample: c_nvmlGpmSample_t) -> None: ...
def nvmlGpmSampleGet(device: c_nvmlDevice_t, gpmSample: c_nvmlGpmSample_t) -> c_nvmlGpmSample_t: ...
def nvmlGpmMetricsGet(metricsGet: c_nvmlGpmMetricsGet_t) -> c_nvmlGpmMetricsGet_t: ...
