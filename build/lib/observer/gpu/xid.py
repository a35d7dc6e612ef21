"""What each Xid code means, by NVIDIA's Xid catalogue
(https://docs.nvidia.com/deploy/xid-errors/, "Analyzing Xid Errors with the Xid Catalog"):
its meaning, the class of cause it points to, and whether the GPU is left unfit for new work
until it is reset or serviced (`fatal`, what the controller's platform-reaction rule reads).
Codes missing here are `unknown`, never guessed."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class XidClass(StrEnum):
    APPLICATION = "application"  # the job's own fault (bad memory access, killed channel)
    MEMORY = "memory"  # ECC, row remapping, page retirement
    BUS = "bus"  # PCIe: the GPU no longer answers
    NVLINK = "nvlink"
    FIRMWARE = "firmware"  # GSP and the GPU's micro-controllers
    DRIVER = "driver"  # the driver's or the system's fault (timeouts, corrupted commands)
    THERMAL_POWER = "thermal_power"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class XidInfo:
    code: int
    meaning: str
    xid_class: XidClass
    fatal: bool


_A, _M, _B, _N, _F, _D, _T = (
    XidClass.APPLICATION,
    XidClass.MEMORY,
    XidClass.BUS,
    XidClass.NVLINK,
    XidClass.FIRMWARE,
    XidClass.DRIVER,
    XidClass.THERMAL_POWER,
)
_TABLE: dict[int, tuple[str, XidClass, bool]] = {
    8: ("GPU stopped processing (channel idle timeout)", _D, False),
    13: ("Graphics engine exception", _A, False),
    31: ("GPU memory page fault", _A, False),
    32: ("Invalid or corrupted push buffer stream", _D, False),
    38: ("Driver firmware error", _F, False),
    43: ("GPU stopped processing (channel reset after a user application fault)", _A, False),
    44: ("Graphics engine fault during context switch", _D, True),
    45: (
        "Preemptive cleanup after earlier errors (the channel's processes were stopped)",
        _A,
        False,
    ),
    46: ("GPU stopped processing", _D, True),
    48: ("Double-bit ECC error", _M, True),
    54: ("Auxiliary power is not connected", _T, True),
    56: ("Display engine error", _D, False),
    57: ("Error programming video memory interface", _M, True),
    58: ("Unstable video memory interface detected", _M, True),
    61: ("Internal micro-controller breakpoint or warning", _F, True),
    62: ("Internal micro-controller halt", _F, True),
    63: ("ECC page retirement or row remapping recorded", _M, False),
    64: ("ECC page retirement or row remapping recording failed", _M, True),
    68: ("Video processor exception", _D, False),
    69: ("Graphics engine class error", _A, False),
    74: ("NVLink error", _N, True),
    79: ("GPU has fallen off the bus", _B, True),
    92: ("High single-bit ECC error rate", _M, False),
    94: (
        "Contained ECC error (only the application that touched the memory is affected)",
        _M,
        False,
    ),
    95: ("Uncontained ECC error (every application on the GPU is affected)", _M, True),
    109: ("Context switch timeout", _D, False),
    110: ("Security fault", _F, True),
    119: ("GSP RPC timeout", _F, True),
    120: ("GSP error", _F, True),
    121: ("C2C link corrected error", _B, False),
    122: ("SPI PMU RPC read failure", _F, False),
    123: ("SPI PMU RPC write failure", _F, False),
    124: ("SPI PMU RPC erase failure", _F, False),
    140: ("Unrecovered ECC error", _M, True),
    143: ("GPU initialisation failure", _F, True),
    144: ("NVLink SAW error", _N, True),
    145: ("NVLink RLW error", _N, True),
    146: ("NVLink TLW error", _N, True),
    147: ("NVLink TREX error", _N, True),
    148: ("NVLink NVLPW control error", _N, True),
    149: ("NVLink NETIR error", _N, True),
    154: ("GPU recovery action changed", _D, False),
}


def xid_info(code: int) -> XidInfo:
    known = _TABLE.get(code)
    if known is None:
        return XidInfo(code, "not in the Xid catalogue table", XidClass.UNKNOWN, False)
    return XidInfo(code, *known)
