"""Every file a setting names is inside a volume of the container that reads it: the chart
mounts what it owns, `extraHostVolumes`/`extraVolumes`/`extraVolumeMounts` mount the rest for
both workloads, and a path-valued setting outside every mount refuses to render rather than
leave the process a missing file. The rendered pods of the extra-volumes value set run in the
rehearsal (test_rehearsal.py) like every CI value set."""

from __future__ import annotations

import re
import subprocess
import typing
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from observer.cli import _parser
from observer.settings import Settings
from tests.deploy.chart import CHART, config_of, one, pod_spec, render, tool
from tests.deploy.test_chart_args import observer_command_lines

pytestmark = pytest.mark.chart

EXTRA_VOLUMES = CHART / "ci" / "extra-volumes-values.yaml"
# Path-valued in effect though typed otherwise, or a mapping the chart fills itself.
GLOBS = {"controller.logs.files.pattern"}
CHART_FILLED = {"controller.kubernetes.tenant_token_files"}  # under the token mounts


def path_settings(model: type[BaseModel] = Settings, prefix: str = "") -> set[str]:
    """Every setting typed as a path, by its dotted name."""
    found = set()
    for name, field in model.model_fields.items():
        members = [field.annotation, *typing.get_args(field.annotation)]
        for member in members:
            if isinstance(member, type) and issubclass(member, BaseModel):
                found |= path_settings(member, f"{prefix}{name}.")
        if Path in members:
            found.add(f"{prefix}{name}")
    return found


def checked_by_the_chart() -> dict[str, list[str]]:
    text = (CHART / "templates" / "_helpers.tpl").read_text()
    block = re.search(r'define "observer.pathSettings" -}}\n(.*?)\{\{- end -}}', text, re.S)
    assert block, "_helpers.tpl defines no observer.pathSettings"
    listed: dict[str, list[str]] = yaml.safe_load(block.group(1))
    return listed


def refusal(*sets: str) -> str:
    """helm template's error for these --set values; fails when it renders."""
    args = [str(tool("helm")), "template", "observer", str(CHART)]
    for value in sets:
        args += ["--set", value]
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    assert result.returncode != 0, f"rendered with {sets}"
    return result.stderr


def mounted_from(spec: dict[str, Any], container: str, path: str) -> tuple[dict[str, Any], str]:
    """The pod volume holding `path` in `container`, and the path inside the volume."""
    (found,) = [c for c in spec["containers"] if c["name"] == container]
    volumes = {v["name"]: v for v in spec["volumes"]}
    holders = [
        m
        for m in found["volumeMounts"]
        if PurePosixPath(path).is_relative_to(PurePosixPath(m["mountPath"]))
    ]
    assert holders, f"{path} is outside every mount of {container}"
    mount = max(holders, key=lambda m: len(m["mountPath"]))
    return volumes[mount["name"]], str(PurePosixPath(path).relative_to(mount["mountPath"]))


def test_the_chart_checks_every_path_valued_setting_in_the_container_that_reads_it():
    listed = checked_by_the_chart()
    wanted = (path_settings() | GLOBS) - CHART_FILLED

    assert set(listed["agent"]) | set(listed["controller"]) == wanted
    assert all(name.startswith("agent.") for name in listed["agent"])
    assert not any(name.startswith("agent.") for name in listed["controller"])


@pytest.mark.parametrize(
    ("setting", "value", "container"),
    [
        ("agent.passwd_file", "/etc/passwd", "agent"),
        ("agent.kernel_log_path", "/dev/kmsg", "agent"),
        ("agent.state_dir", "var/lib/observer-agent", "agent"),  # the image's WORKDIR: unmounted
        ("controller.kubernetes.audit_log_path", "/var/log/kubernetes/audit.log", "controller"),
        ("controller.logs.files.pattern", "/var/log/collected/probes.log*", "controller"),
        ("reports.output_dir", "/srv/reports", "controller"),
    ],
)
def test_a_path_outside_every_mount_refuses_to_render(setting, value, container):
    error = refusal(f"settings.{setting}={value}")

    assert f"settings.{setting} ({value}) is outside every volume the {container} container" in (
        error
    )
    assert f"{container}.extraHostVolumes" in error


def test_the_chart_own_mounts_and_relative_paths_on_the_data_volume_pass():
    objects = render(
        tool("helm"),
        sets={
            "settings.reports.output_dir": "reports",  # the WORKDIR, the controller's data volume
            "settings.controller.logs.reader": "files",
            "settings.controller.logs.files.pattern": "/var/lib/observer/logs/probes.log*",
            "settings.agent.pod_logs_dir": "/var/log/pods",
        },
    )
    spec = pod_spec(one(objects, "Deployment"))

    volume, inside = mounted_from(spec, "controller", "/var/lib/observer/reports")
    assert volume["name"] == "data" and inside == "reports"


def test_with_postgresql_the_report_files_stay_on_the_persistent_volume():
    objects = render(tool("helm"), sets={"database.urlSecret.name": "observer-db"})
    settings = Settings.model_validate(config_of(objects))
    spec = pod_spec(one(objects, "Deployment"))

    reports = PurePosixPath("/var/lib/observer", settings.reports.output_dir)  # from the WORKDIR
    volume, _ = mounted_from(spec, "controller", str(reports))
    claim = one(objects, "PersistentVolumeClaim")
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]


def test_extra_volumes_bring_the_files_the_settings_name_to_both_workloads():
    objects = render(tool("helm"), EXTRA_VOLUMES)
    settings = Settings.model_validate(config_of(objects))
    agent = pod_spec(one(objects, "DaemonSet"))
    controller = pod_spec(one(objects, "Deployment"))

    passwd, inside = mounted_from(agent, "agent", str(settings.agent.passwd_file))
    assert passwd["hostPath"] == {"path": "/etc/passwd", "type": "File"} and inside == "."
    reports, inside = mounted_from(controller, "controller", str(settings.reports.output_dir))
    assert "emptyDir" in reports and inside == "."
    for argv in observer_command_lines(objects).values():
        _parser().parse_args(argv)


def test_without_its_mount_an_extra_volume_setting_is_refused_again():
    error = refusal(
        "settings.agent.passwd_file=/host/etc/passwd",
        "agent.extraHostVolumes[0].name=host-passwd",
        "agent.extraHostVolumes[0].hostPath=/etc/passwd",
    )
    assert "settings.agent.passwd_file (/host/etc/passwd) is outside every volume" in error
