"""The driver's own list of its GPUs in the host's /proc: each GPU's device minor number beside
its UUID, as the NVIDIA driver writes /proc/driver/nvidia/gpus/<bus id>/information."""

from __future__ import annotations

from pathlib import Path

from observer.gpu.minors import uuids_by_minor


def write_gpu(proc: Path, bus_id: str, uuid: str, minor: int) -> None:
    gpu = proc / "driver" / "nvidia" / "gpus" / bus_id
    gpu.mkdir(parents=True)
    (gpu / "information").write_text(
        "Model: \t\t NVIDIA H200\n"
        "IRQ:   \t\t 0\n"
        f"GPU UUID: \t {uuid}\n"
        "Video BIOS: \t 96.00.a5.00.1a\n"
        "Bus Type: \t PCIe\n"
        "DMA Size: \t 52 bits\n"
        "DMA Mask: \t 0xfffffffffffff\n"
        f"Bus Location: \t {bus_id}\n"
        f"Device Minor: \t {minor}\n"
        "GPU Excluded:\t No\n"
    )


def test_each_gpu_is_its_uuid_by_its_device_minor_number(tmp_path):
    write_gpu(tmp_path, "0000:18:00.0", "GPU-c114cebc-2c7e-dd2b-ea65-fc1a95e8cebc", 1)
    write_gpu(tmp_path, "0000:3b:00.0", "GPU-77a0fa6b-1f4e-2a5c-9d10-0b3c5e7f9a21", 0)

    assert uuids_by_minor(tmp_path) == {
        1: "GPU-c114cebc-2c7e-dd2b-ea65-fc1a95e8cebc",
        0: "GPU-77a0fa6b-1f4e-2a5c-9d10-0b3c5e7f9a21",
    }


def test_a_node_without_the_driver_has_no_gpu_by_minor(tmp_path):
    assert uuids_by_minor(tmp_path) == {}


def test_a_file_without_both_fields_names_no_gpu(tmp_path):
    write_gpu(tmp_path, "0000:18:00.0", "GPU-c114cebc-2c7e-dd2b-ea65-fc1a95e8cebc", 1)
    (tmp_path / "driver/nvidia/gpus/0000:3b:00.0").mkdir()
    (tmp_path / "driver/nvidia/gpus/0000:3b:00.0/information").write_text("Model: H200\n")

    assert uuids_by_minor(tmp_path) == {1: "GPU-c114cebc-2c7e-dd2b-ea65-fc1a95e8cebc"}
