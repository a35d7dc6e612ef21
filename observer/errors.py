"""The documented error tree. Vendor errors are converted into these at the boundary."""


class ObserverError(Exception):
    """Root of every error the observer raises on purpose."""


class ConfigError(ObserverError):
    """The configuration is missing, unparsable or invalid; `problems` are 'path: message'."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class GpuError(ObserverError):
    """A read from the GPU boundary failed as a whole (not one call of one GPU)."""


class DriverNotLoadedError(GpuError):
    """NVML is present but the kernel driver is not loaded: the node is blind."""


class LibraryNotFoundError(GpuError):
    """libnvidia-ml.so.1 cannot be loaded."""


class TraceError(GpuError):
    """A recorded trace is missing or malformed."""


class BackendError(ObserverError):
    """A scheduler backend (Slurm, Kubernetes, simulated) could not be read or acted on."""


class StoreError(ObserverError):
    """The database could not be reached or refused a write."""


class SchemaError(StoreError):
    """The database is missing or not migrated to this code's schema; `problem` says which."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"{problem}: run `observer db upgrade`")
        self.problem = problem


class SchemaNewerError(StoreError):
    """The database was migrated by a newer release, to a revision this code does not know
    (after a rollback): `db upgrade` cannot help. The message is the whole line: both
    revisions, the release that migrated it and the way back to it."""


class PortInUseError(ObserverError):
    """Another process already listens on the address a server was to bind."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(f"port {port} on {host} is already in use")
        self.host = host
        self.port = port


class ListenAddressError(ObserverError):
    """The address a server was to bind is no address of this machine, or no address at all
    (a name that does not resolve)."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"cannot listen on {host} ({reason})")
        self.host = host


class ProbeError(ObserverError):
    """A probe could not be submitted, followed or cancelled."""


class GpuLostError(GpuError):
    """One device fell off the bus (NVML_ERROR_GPU_IS_LOST); its handle cannot be used."""


class OwnerSourceError(ObserverError):
    """The node's scheduler agent (kubelet, slurmd) could not be asked who runs here."""


class ReportError(ObserverError):
    """A report cannot be built for what was asked (a day not over, a soak not started)."""


class SnapshotError(ObserverError):
    """A body read as an agent's snapshot is not one: not UTF-8, not JSON, or a field missing
    or of the wrong type. The message names what was wrong and where."""


# The command line's exit codes: done, failed, refused (bad input).
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INVALID = 2
# A newer release migrated the store (SchemaNewerError): neither a retry nor `db upgrade` of
# this code helps, only that release or a backup; an init container's status tells it apart.
EXIT_SCHEMA_NEWER = 3
# `observer probe gpu-burn` ends with this when the node has no usable GPU (sysexits
# EX_UNAVAILABLE); probes/outcome.py reads it as "no GPU on the node", not as a failure.
NO_GPU_EXIT_CODE = 69


class WorkloadError(ObserverError):
    """A probe's own program (`observer probe ...`) cannot do its work; `exit_code` is the
    documented status it ends with, the message its one line on stderr."""

    exit_code = 1


class NoGpuError(WorkloadError):
    """No usable GPU here: no libcuda.so.1, or the driver sees no device."""

    exit_code = NO_GPU_EXIT_CODE


class GpuOutOfMemoryError(WorkloadError):
    """The GPU could not give the memory asked for (CUDA_ERROR_OUT_OF_MEMORY)."""

    exit_code = 71


class CudaCallError(WorkloadError):
    """Any other CUDA driver call failed; the message names the call and CUDA's error."""

    exit_code = 70


class GpuCommunicationError(WorkloadError):
    """GPUs of one job could not reach each other, or only slower than their link should:
    the message names each pair and what it measured (`observer probe gpu-comm`)."""

    exit_code = 72
