"""The kernel log as a second Xid source: recorded `NVRM: Xid` lines of several drivers'
wordings, in /dev/kmsg's, syslog's and journald's formats, read from where the last reading
(of this process or a previous one) stopped; a log in no known format is said to be one."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from observer.clock import ManualClock
from observer.domain import XidEvent, XidSource
from observer.errors import GpuError
from observer.gpu.kernel_log import KernelLog, parse_line, parse_xid, pci_key

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kernel-log" / "kmsg.txt"
BOOT = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
NOW = datetime(2026, 12, 20, 0, 0, tzinfo=UTC)


def after_boot(usec: int) -> datetime:
    return BOOT + timedelta(microseconds=usec)


@pytest.fixture
def kmsg(tmp_path: Path) -> Path:
    copy = tmp_path / "kmsg"
    shutil.copy(FIXTURE, copy)
    return copy


def reader(kmsg: Path, state: Path, boot_id: str = "boot-1") -> KernelLog:
    return KernelLog(kmsg, state, boot_id, BOOT, ManualClock(NOW))


def append(kmsg: Path, line: str) -> None:
    with kmsg.open("a") as log:
        log.write(line + "\n")


def test_every_drivers_wording_gives_the_code_the_gpu_and_the_process_where_named(
    kmsg: Path, tmp_path: Path
) -> None:
    log = reader(kmsg, tmp_path / "position.json")

    got = [(e.code, e.pci_bus_id, e.pid, e.process_name, e.at) for e in log.read()]

    assert got == [
        (79, "0000:3b:00", 1912, "python3", after_boot(86_400_123_456)),
        (31, "0000:18:00", 24263, "python", after_boot(90_000_000_000)),
        (119, "0000:9d:00", 1582, "nvidia-smi", after_boot(91_000_000_000)),
        (94, "0000:ba:00", None, None, after_boot(92_000_000_000)),
        (13, "0000:03:00", None, None, after_boot(93_000_000_000)),
        (63, "0000:17:00", None, None, after_boot(94_000_000_000)),
        (48, "0000:41:00", 11928, "python3", after_boot(95_000_000_000)),
        (43, "0000:41:00", 11928, "python3", after_boot(96_000_000_000)),
    ]


def test_the_driver_text_after_the_code_is_kept_and_the_source_named() -> None:
    line = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1912, name=python3, GPU has fallen off the bus."

    event = parse_xid(line, BOOT)

    assert event == XidEvent(
        at=BOOT,
        code=79,
        source=XidSource.KERNEL_LOG,
        pci_bus_id="0000:3b:00",
        pid=1912,
        process_name="python3",
        detail="pid=1912, name=python3, GPU has fallen off the bus.",
    )
    assert parse_xid("NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.", BOOT) is None


def test_nvml_and_the_kernel_spell_one_pci_address_the_same() -> None:
    assert pci_key("00000000:3B:00.0") == pci_key("0000:3b:00") == pci_key("PCI:0000:3b:00")
    assert pci_key("00000000:3B:00.0") != pci_key("00000000:3C:00.0")


def test_a_second_reading_gives_only_what_was_written_since(kmsg: Path, tmp_path: Path) -> None:
    log = reader(kmsg, tmp_path / "position.json")
    assert len(log.read()) == 8

    assert log.read() == []
    append(
        kmsg, "4,1011,97000000000,-;NVRM: Xid (PCI:0000:3b:00): 45, pid=1913, name=python3, Ch 8"
    )
    assert [e.code for e in log.read()] == [45]


def test_a_restarted_reader_reports_nothing_twice_and_misses_nothing_written_while_down(
    kmsg: Path, tmp_path: Path
) -> None:
    position = tmp_path / "state" / "position.json"
    first = reader(kmsg, position)
    assert len(first.read()) == 8
    first.close()
    append(
        kmsg, "4,1011,97000000000,-;NVRM: Xid (PCI:0000:3b:00): 45, pid=1913, name=python3, Ch 8"
    )

    second = reader(kmsg, position)  # /dev/kmsg opened again starts at the oldest record

    assert [(e.code, e.pid) for e in second.read()] == [(45, 1913)]
    assert second.read() == []


def test_after_a_reboot_the_old_position_means_nothing(kmsg: Path, tmp_path: Path) -> None:
    position = tmp_path / "position.json"
    reader(kmsg, position).read()
    fresh = kmsg.with_name("kmsg.new")  # the new boot's /dev/kmsg: its own device
    shutil.copy(FIXTURE, fresh)
    fresh.replace(kmsg)

    rebooted = reader(kmsg, position, boot_id="boot-2")

    assert len(rebooted.read()) == 8


def test_a_half_written_last_line_is_read_once_it_is_whole(kmsg: Path, tmp_path: Path) -> None:
    log = reader(kmsg, tmp_path / "position.json")
    log.read()
    with kmsg.open("a") as f:
        f.write("4,1011,97000000000,-;NVRM: Xid (PCI:0000:3b:00): 7")

    assert log.read() == []
    append(kmsg, "9, pid=1, name=x, GPU has fallen off the bus.")
    assert [e.code for e in log.read()] == [79]


def test_a_log_that_cannot_be_opened_is_an_error_naming_it(tmp_path: Path) -> None:
    log = reader(tmp_path / "no-such-kmsg", tmp_path / "position.json")

    with pytest.raises(GpuError, match="no-such-kmsg"):
        log.read()


SHANGHAI = timezone(timedelta(hours=8))


@pytest.fixture
def shanghai(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The host's local time is China's (a syslog date is written in it)."""
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def copy_of(name: str, tmp_path: Path) -> Path:
    copy = tmp_path / name
    shutil.copy(FIXTURE.with_name(name), copy)
    return copy


def test_a_syslog_kern_log_gives_the_kernels_xids_at_the_hosts_local_time(
    shanghai: None, tmp_path: Path
) -> None:
    log = reader(copy_of("kern.log", tmp_path), tmp_path / "position.json")

    got = [(e.code, e.pci_bus_id, e.pid, e.process_name, e.at) for e in log.read()]

    assert got == [
        (79, "0000:3b:00", 1912, "python3", datetime(2026, 12, 7, 1, 30, 5, tzinfo=SHANGHAI)),
        (31, "0000:18:00", 24263, "python", datetime(2026, 12, 17, 9, 2, 41, tzinfo=SHANGHAI)),
        (94, "0000:ba:00", None, None, datetime(2026, 12, 17, 9, 2, 41, tzinfo=SHANGHAI)),
    ]
    assert not log.unrecognised


def test_rsyslogs_rfc3339_file_format_gives_each_xid_at_its_own_offset(tmp_path: Path) -> None:
    log = reader(copy_of("kern-rfc3339.log", tmp_path), tmp_path / "position.json")

    got = [(e.code, e.pci_bus_id, e.pid, e.at) for e in log.read()]

    assert got == [
        (79, "0000:3b:00", 1912, datetime(2026, 12, 7, 1, 30, 5, 123456, tzinfo=SHANGHAI)),
        (119, "0000:9d:00", 1582, datetime(2026, 12, 7, 2, 15, 42, 1, tzinfo=SHANGHAI)),
    ]


def test_journalctl_json_gives_the_kernel_transports_xids_whatever_the_messages_bytes(
    tmp_path: Path,
) -> None:
    log = reader(copy_of("journal.jsonl", tmp_path), tmp_path / "position.json")

    got = [(e.code, e.pci_bus_id, e.pid, e.at) for e in log.read()]

    assert got == [
        (79, "0000:3b:00", 1912, datetime(2026, 12, 7, 1, 30, 5, 123456, tzinfo=SHANGHAI)),
        (48, "0000:41:00", 11928, datetime(2026, 12, 7, 2, 15, 42, 1, tzinfo=SHANGHAI)),
    ]


def test_dmesgs_own_lines_count_from_boot(tmp_path: Path) -> None:
    line = "[86400.123456] NVRM: Xid (PCI:0000:3b:00): 79, pid=1912, name=python3, GPU has fallen"

    parsed = parse_line(line, BOOT, NOW)

    assert parsed is not None
    assert parsed.at == after_boot(86_400_123_456)
    assert parse_xid(parsed.message, parsed.at) is not None


def test_a_syslog_date_of_late_december_read_in_january_is_last_years(shanghai: None) -> None:
    new_year = datetime(2027, 1, 1, 0, 0, 30, tzinfo=SHANGHAI)

    parsed = parse_line("Dec 31 23:59:58 gpu-node-3 kernel: NVRM: loading", BOOT, new_year)

    assert parsed is not None
    assert parsed.at == datetime(2026, 12, 31, 23, 59, 58, tzinfo=SHANGHAI)


def test_a_log_in_no_known_format_is_unrecognised_after_its_first_hundred_lines(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "messages"  # `journalctl -o cat`: the messages alone, no time
    plain.write_text("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.08\n" * 99)
    log = reader(plain, tmp_path / "position.json")
    log.read()
    assert not log.unrecognised

    append(plain, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1912, name=python3, GPU has fallen off")
    log.read()
    assert log.unrecognised


def test_a_syslog_file_without_any_xid_is_observing(tmp_path: Path) -> None:
    kern = tmp_path / "kern.log"
    kern.write_text("Dec  7 01:29:58 gpu-node-3 kernel: usb 1-1: new high-speed USB device\n" * 150)
    log = reader(kern, tmp_path / "position.json")

    assert log.read() == []
    assert not log.unrecognised


def test_a_restarted_reader_of_a_file_starts_after_the_last_whole_line_it_read(
    tmp_path: Path,
) -> None:
    kern = copy_of("kern-rfc3339.log", tmp_path)
    position = tmp_path / "state" / "position.json"
    first = reader(kern, position)
    assert len(first.read()) == 2
    first.close()
    append(
        kern,
        "2026-12-07T03:00:00.000001+08:00 gpu-node-3 kernel: NVRM: Xid (PCI:0000:3b:00): 45, "
        "pid=1913, name=python3, Ch 8",
    )

    second = reader(kern, position, boot_id="boot-2")  # a file spans boots

    assert [(e.code, e.pid) for e in second.read()] == [(45, 1913)]
    assert second.read() == []


def test_a_rotated_kern_log_is_followed_into_its_new_file(tmp_path: Path) -> None:
    kern = copy_of("kern-rfc3339.log", tmp_path)
    log = reader(kern, tmp_path / "position.json")
    assert len(log.read()) == 2
    append(
        kern,
        "2026-12-07T03:00:00.000001+08:00 gpu-node-3 kernel: NVRM: Xid (PCI:0000:3b:00): 45, "
        "pid=1913, name=python3, Ch 8",
    )
    kern.rename(tmp_path / "kern-rfc3339.log.1")  # logrotate: rename, then a new file
    kern.write_text(
        "2026-12-07T03:00:01.000001+08:00 gpu-node-3 kernel: NVRM: Xid (PCI:0000:18:00): 31, "
        "pid=24263, name=python, Ch 00000008\n"
    )

    assert [e.code for e in log.read()] == [45, 31]
    assert log.read() == []
