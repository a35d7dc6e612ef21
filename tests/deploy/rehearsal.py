"""A deployment rehearsal: the chart's pods run as rendered, each container a child process.

Every long-running workload (Deployment, DaemonSet, StatefulSet) runs its init containers one
after another (each must exit 0), then its containers, whose rendered probes are asked exactly
as rendered (httpGet path, port, scheme, headers; tcpSocket) until every one answers; then the
helm-test Pods run to completion against them (exit 0), and every daemon is sent SIGTERM and
must exit 0 within its pod's terminationGracePeriodSeconds. Each child gets, from the render:

- its command line: `command` (else the image's ENTRYPOINT) and `args`, `$(VAR)` expanded from
  its environment as the kubelet does; `observer` is the real entry point on the image's PATH.
- its volumes: configMap items from the rendered ConfigMaps; secret items, secretKeyRef and
  envFrom from test Secrets (`secrets_for`); emptyDir and persistentVolumeClaim as empty
  directories the pod's user owns; hostPath as a link to this machine's path (an empty
  directory where it has none). File modes and the fsGroup group as the kubelet sets them.
- its environment: the image's ENV, then the rendered env (downward-API fields filled in).
- its identity, when the tests run as root: runAsUser/runAsGroup (the image's USER when unset),
  fsGroup as a supplementary group, capabilities dropped (`drop: [ALL]`) and no privilege
  escalation, through setpriv. readOnlyRootFilesystem as far as a process can honour it: the
  pod's root stands for the image's filesystem and is root's, so a non-root child writes only
  to its writable volumes; after the run no file of that user may exist in this machine's
  world-writable directories. A container without readOnlyRootFilesystem is held to it all
  the same, and a readOnly mount of a writable volume is not enforced. A uid-0 container
  (the agent by default) is not kept from writing the pod's root, and without root none of
  this part is rehearsed (the children run as the tests' user).
- its working directory: the container's workingDir, else the image's WORKDIR.

What differs from a cluster, each in one place:

- paths (the one liberty with the render): `PodRoot.here` maps a container's path P to
  <pod root>/P. Args, env values and the ConfigMaps' settings that name a path under a
  mountPath are rewritten through it, and TMPDIR names the mapped /tmp where /tmp is mounted.
- the image: its ENV's venv is the one running these tests, with this checkout on PYTHONPATH.
- ports: each containerPort is a free port here, handed to the daemon as the setting the
  chart renders it from (`PORT_SETTINGS`: OBSERVER_<command>__LISTEN_PORT for `http`,
  OBSERVER_AGENT__METRICS_PORT for `metrics`).
- service names: `service_urls` maps http://<service>[.<namespace>[.svc[.cluster.local]]]:<port>
  to 127.0.0.1 and the port of the container the Service selects.
- the Kubernetes API: a pod that mounts its service-account token gets a kubeconfig for the
  emulator (tests/backends/k8s_harness.py), as OBSERVER_CONTROLLER__KUBERNETES__KUBECONFIG_PATH:
  the in-cluster files the client reads are at fixed paths. It is the emulator's administrator
  (RBAC is not rehearsed).
- Slurm: this machine's Slurm programs and the test cluster's SLURM_CONF (the image has none).
- NVML: a container that asks the NVIDIA runtime for GPUs (`asks_for_gpus`: the variable, the
  volume-mounts device list or a CDI annotation) finds the stand-in libnvidia-ml.so.1 on
  LD_LIBRARY_PATH, where the runtime would put the driver's.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
import yaml

from observer.cli import _parser
from observer.settings.controller import ControllerSettings
from tests import components
from tests.backends.k8s_harness import KubernetesHarness
from tests.backends.slurm_harness import slurm_harness
from tests.deploy.chart import REPO, all_containers, need, pod_spec
from tests.deploy.test_chart_args import entrypoint
from tests.deploy.test_image import stages
from tests.gpu.fake_nvml import FakeNvmlGpu, require_library, write_state
from tests.support.net import free_port

LONG_RUNNING = ("Deployment", "DaemonSet", "StatefulSet")
READY_WITHIN_SECONDS = 60.0
TEST_POD_WITHIN_SECONDS = 60.0
POLL_SECONDS = 0.2
# The base image's PATH, which the image's `ENV PATH=...:$PATH` extends.
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# What the API server publishes in every namespace (a CA no kubelet of the rehearsal signs with).
PUBLISHED_CONFIG_MAPS = {"kube-root-ca.crt": {"ca.crt": "-----BEGIN CERTIFICATE-----\n"}}
KUBECONFIG_ENV = "OBSERVER_CONTROLLER__KUBERNETES__KUBECONFIG_PATH"
STORE_URL_ENV = "OBSERVER_STORAGE__URL"
# A containerPort's name -> the setting of its daemon's group the chart renders it from.
PORT_SETTINGS = {"http": "LISTEN_PORT", "metrics": "METRICS_PORT"}
# Where a process may write whatever its mounts: what readOnlyRootFilesystem is checked on.
WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm")
LOG_TAIL_LINES = 25
DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"

# Each rehearsal's pods live under a temporary directory of this prefix.
ROOT_PREFIX = "observer-rehearsal-"


@dataclass(frozen=True)
class Image:
    """What deploy/Dockerfile's final stage gives every container."""

    entrypoint: list[str]
    env: dict[str, str]
    workdir: str
    uid: int
    gid: int


def image() -> Image:
    final = stages()[-1]
    (copy,) = final.all("COPY")
    venv = copy.split()[-1]
    env: dict[str, str] = {}
    for instruction in final.all("ENV"):
        for word in shlex.split(instruction):
            name, _, value = word.partition("=")
            env[name] = value.replace("$PATH", BASE_PATH).replace(venv, sys.prefix)
    env["PYTHONPATH"] = str(REPO)
    (workdir,) = final.all("WORKDIR")
    (user,) = final.all("USER")
    uid, gid = (int(part) for part in user.split(":"))
    return Image(entrypoint(), env, workdir, uid, gid)


@dataclass(frozen=True)
class Cluster:
    """What the pods run against: the namespace, the rendered ConfigMaps, the test Secrets,
    and what the platform adds to each container."""

    namespace: str
    config_maps: Mapping[str, Mapping[str, str]]
    secrets: Mapping[str, Mapping[str, str]]
    node_name: str
    nvml: Mapping[str, str]  # added to containers that ask for GPUs
    kubeconfig: str | None = None  # for pods that mount their service-account token
    env: Mapping[str, str] = field(default_factory=dict)  # added to every container


@contextmanager
def cluster_for(objects: list[dict[str, Any]], root: Path) -> Iterator[Cluster]:
    """The platform the rendered settings choose, and the test Secrets for it."""
    controller = yaml.safe_load(configmap_data(objects)["config.yaml"]).get("controller", {})
    backend = controller.get("backend", ControllerSettings().backend)
    token_files = (controller.get("kubernetes") or {}).get("tenant_token_files") or {}
    tokens = {tenant: secrets.token_urlsafe(24) for tenant in token_files}
    token_at = {path: tokens[tenant] for tenant, path in token_files.items()}
    with ExitStack() as stack:
        store_url = stack.enter_context(postgres_schema()) if wants_store_url(objects) else None
        cluster = Cluster(
            namespace=workloads(objects)[0]["metadata"]["namespace"],
            config_maps={
                o["metadata"]["name"]: o["data"] for o in objects if o["kind"] == "ConfigMap"
            },
            secrets=secrets_for(objects, store_url, token_at),
            node_name="gpu-node-0",
            nvml=nvml_env(root) if wants_gpus(objects) else {},
        )
        if backend == "kubernetes":
            k8s = stack.enter_context(KubernetesHarness())
            for tenant, token in tokens.items():
                k8s.server.tokens[token] = tenant
            yield replace(cluster, node_name=k8s.node_names[0], kubeconfig=kubeconfig(k8s.url))
        elif backend == "slurm":
            slurm = stack.enter_context(slurm_harness())
            yield replace(cluster, env={"SLURM_CONF": str(slurm.slurm_conf)})
        else:
            yield cluster


@contextmanager
def postgres_schema() -> Iterator[str]:
    """A URL whose connections see only a new, empty schema of the test server."""
    components.require("postgres")
    url = os.environ.get("OBSERVER_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    schema = f"rehearsal_{secrets.token_hex(8)}"
    try:
        with admin.connect() as connection:
            connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    except sa.exc.OperationalError as exc:
        admin.dispose()
        need(
            "PostgreSQL",
            f"{sa.make_url(url)!r} is unreachable ({exc.orig}); set OBSERVER_TEST_POSTGRES_URL",
        )
    try:
        options = {"options": f"-csearch_path={schema}"}
        yield sa.make_url(url).update_query_dict(options).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


NVIDIA_DEVICE_LIST = "/var/run/nvidia-container-devices"  # the runtime's volume-mounts list


def asks_for_gpus(annotations: dict[str, str], container: dict[str, Any]) -> bool:
    """Whether the NVIDIA runtime gives this container the driver, by each way it is asked:
    NVIDIA_VISIBLE_DEVICES (not void/none), a mount under its device list, a CDI annotation
    naming an nvidia.com/gpu device."""
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    mounts = [m["mountPath"] for m in container.get("volumeMounts", [])]
    cdi = [v for k, v in annotations.items() if k.startswith("cdi.k8s.io/")]
    return (
        env.get("NVIDIA_VISIBLE_DEVICES", "void") not in ("void", "none", "")
        or any(path.startswith(f"{NVIDIA_DEVICE_LIST}/") for path in mounts)
        or any(device.startswith("nvidia.com/gpu=") for v in cdi for device in v.split(","))
    )


def template_annotations(obj: dict[str, Any]) -> dict[str, str]:
    """A workload's pods carry its template's annotations; a bare Pod its own."""
    meta: dict[str, Any] = obj.get("spec", {}).get("template", obj)["metadata"]
    annotations: dict[str, str] = meta.get("annotations") or {}
    return annotations


def wants_gpus(objects: list[dict[str, Any]]) -> bool:
    return any(
        asks_for_gpus(template_annotations(obj), container)
        for obj in workloads(objects)
        for container in all_containers(pod_spec(obj))
    )


def nvml_env(root: Path) -> dict[str, str]:
    """The stand-in library where the NVIDIA runtime puts the driver's, with eight idle GPUs."""
    library = require_library()
    state = root / "fake-nvml-state"
    write_state(state, [FakeNvmlGpu()] * 8)
    state.chmod(0o644)
    return {"LD_LIBRARY_PATH": str(library.parent), "FAKE_NVML_STATE": str(state)}


def workloads(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] in LONG_RUNNING]


def helm_test_pods(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        o
        for o in objects
        if o["kind"] == "Pod"
        and "test" in o["metadata"].get("annotations", {}).get("helm.sh/hook", "").split(",")
    ]


def secrets_for(
    objects: list[dict[str, Any]], store_url: str | None, token_at: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """A Secret for every one the pods name, holding each key they read: the store's URL,
    the emulator's token for a file the settings read a tenant's token from, else a
    placeholder."""
    found: dict[str, dict[str, str]] = {}
    for obj in [*workloads(objects), *helm_test_pods(objects)]:
        spec = pod_spec(obj)
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for container in all_containers(spec):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    value = store_url if env["name"] == STORE_URL_ENV else None
                    data = found.setdefault(ref["name"], {})
                    data[ref["key"]] = value or f"test-{ref['name']}-{ref['key']}"
            for source in container.get("envFrom", []):
                if "secretRef" in source:  # its keys are the site's: none here
                    found.setdefault(source["secretRef"]["name"], {})
            for mount in container.get("volumeMounts", []):
                secret = volumes[mount["name"]].get("secret")
                for item in (secret or {}).get("items", []):
                    token = token_at.get(f"{mount['mountPath']}/{item['path']}")
                    data = found.setdefault(secret["secretName"], {})
                    data[item["key"]] = token or "test-secret"
    return found


def configmap_data(objects: list[dict[str, Any]]) -> dict[str, str]:
    """The data of the ConfigMap the pods mount their settings from (its `config.yaml`), one
    copy in each namespace that runs a pod of the chart (agent.namespace)."""
    found = [o["data"] for o in objects if o["kind"] == "ConfigMap" and "config.yaml" in o["data"]]
    assert found and all(d == found[0] for d in found), f"{len(found)} different config.yaml"
    data: dict[str, str] = found[0]
    return data


def wants_store_url(objects: list[dict[str, Any]]) -> bool:
    return any(
        env["name"] == STORE_URL_ENV and "secretKeyRef" in env.get("valueFrom", {})
        for obj in workloads(objects)
        for container in all_containers(pod_spec(obj))
        for env in container.get("env", [])
    )


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int
    groups: tuple[int, ...]
    drop_all: bool
    no_new_privileges: bool
    read_only_root: bool

    def command(self) -> list[str]:
        """setpriv's words for this identity; none when the tests cannot change identity."""
        if os.geteuid() != 0:
            return []
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) is needed to run the containers' users"
        words = [setpriv, f"--reuid={self.uid}", f"--regid={self.gid}"]
        groups = ",".join(map(str, self.groups))
        words.append(f"--groups={groups}" if groups else "--clear-groups")
        if self.drop_all:
            words += ["--inh-caps=-all", "--bounding-set=-all"]
        if self.no_new_privileges:
            words.append("--no-new-privs")
        return [*words, "--"]


def identity(spec: dict[str, Any], container: dict[str, Any], img: Image) -> Identity:
    pod = spec.get("securityContext", {})
    own = {**pod, **container.get("securityContext", {})}  # the container's fields win
    uid, gid = own.get("runAsUser", img.uid), own.get("runAsGroup", img.gid)
    assert not (own.get("runAsNonRoot") and uid == 0), (
        f"{container['name']}: runAsNonRoot with uid 0, the kubelet refuses to start it"
    )
    groups = [pod["fsGroup"]] if "fsGroup" in pod else []
    return Identity(
        uid,
        gid,
        tuple(groups + pod.get("supplementalGroups", [])),
        "ALL" in own.get("capabilities", {}).get("drop", []),
        own.get("allowPrivilegeEscalation") is False,
        bool(own.get("readOnlyRootFilesystem")),
    )


class PodRoot:
    """One pod on this machine: <root>/<path> is the path of its containers, the image's
    directories root's own, each volume under <root>/.volumes linked at its mountPaths."""

    def __init__(self, obj: dict[str, Any], root: Path, cluster: Cluster, img: Image) -> None:
        self.name = obj["metadata"]["name"]
        self.spec = pod_spec(obj)
        # a workload's pods carry its template's labels; a bare Pod its own
        self.labels: dict[str, str] = (
            obj.get("spec", {}).get("template", obj)["metadata"].get("labels", {})
        )
        self.annotations = template_annotations(obj)
        self.root = root
        self.cluster = cluster
        self.img = img
        self.automounts_token = self.spec.get("automountServiceAccountToken", True)
        pod = self.spec.get("securityContext", {})
        group = pod.get("fsGroup", pod.get("runAsGroup", img.gid))
        self.owner = (pod.get("runAsUser", img.uid), group)
        self.mounts = {
            m["mountPath"] for c in all_containers(self.spec) for m in c.get("volumeMounts", [])
        }
        root.mkdir(mode=0o755)
        for container in all_containers(self.spec):
            for mount in container.get("volumeMounts", []):
                self._mount(mount)
        Path(self.here(img.workdir)).mkdir(parents=True, exist_ok=True)
        if self.automounts_token and cluster.kubeconfig is not None:
            account = root / SERVICE_ACCOUNT_DIR.lstrip("/")
            account.mkdir(parents=True, exist_ok=True)
            (account / "kubeconfig").write_text(cluster.kubeconfig)

    def here(self, path: str) -> str:
        """The container's path as this machine's: under <root>."""
        return str(self.root / path.lstrip("/"))

    def rewrite(self, value: Any) -> Any:
        """Every string naming a path under one of the pod's mountPaths, mapped by here()."""
        if isinstance(value, dict):
            return {key: self.rewrite(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.rewrite(item) for item in value]
        if isinstance(value, str) and any(
            value == m or value.startswith(m.rstrip("/") + "/") for m in self.mounts
        ):
            return self.here(value)
        return value

    def _mount(self, mount: dict[str, Any]) -> None:
        target = Path(self.here(mount["mountPath"]))
        volume = self._volume(mount["name"]) / mount.get("subPath", "")
        if target.is_symlink():
            assert target.readlink() == volume, f"two volumes at {mount['mountPath']}"
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(volume)

    def _volume(self, name: str) -> Path:
        path = self.root / ".volumes" / name
        if path.exists() or path.is_symlink():
            return path
        (volume,) = [v for v in self.spec.get("volumes", []) if v["name"] == name]
        path.parent.mkdir(mode=0o755, exist_ok=True)
        if "configMap" in volume:
            source = volume["configMap"]
            data = self.cluster.config_maps.get(source["name"])
            self._files(path, source, data, f"ConfigMap {source['name']}")
        elif "secret" in volume:
            source = volume["secret"]
            data = self.cluster.secrets.get(source["secretName"])
            self._files(path, source, data, f"Secret {source['secretName']}")
        elif "emptyDir" in volume or "persistentVolumeClaim" in volume:
            path.mkdir()
            path.chmod(0o775)
            if os.geteuid() == 0:
                os.chown(path, *self.owner)
        elif "projected" in volume:
            path.mkdir(mode=0o755)
            for source in volume["projected"]["sources"]:
                self._project(path, source)
        elif "hostPath" in volume:
            host = Path(volume["hostPath"]["path"])
            if host.exists():
                path.symlink_to(host)
            else:
                path.mkdir(mode=0o755)
        else:
            raise AssertionError(f"{self.name}: volume {name} of a kind not rehearsed: {volume}")
        return path

    def _project(self, path: Path, source: dict[str, Any]) -> None:
        """One source of a projected volume: the pod's ServiceAccount token, or a ConfigMap's
        keys (kube-root-ca.crt, which the API server publishes in every namespace)."""
        if "serviceAccountToken" in source:
            (path / source["serviceAccountToken"]["path"]).write_text("rehearsal-token")
            return
        assert set(source) == {"configMap"}, f"{self.name}: a projection not rehearsed: {source}"
        name = source["configMap"]["name"]
        data = self.cluster.config_maps.get(name) or PUBLISHED_CONFIG_MAPS.get(name)
        assert data is not None, f"{self.name}: no ConfigMap {name}"
        for item in source["configMap"].get("items") or [{"key": k, "path": k} for k in data]:
            (path / item["path"]).write_text(data[item["key"]])

    def _files(
        self, path: Path, source: dict[str, Any], data: Mapping[str, str] | None, what: str
    ) -> None:
        assert data is not None or source.get("optional"), f"{self.name}: no {what}"
        items = source.get("items") or [{"key": k, "path": k} for k in data or {}]
        path.mkdir(mode=0o755)
        for item in items:
            assert data is not None and item["key"] in data, f"{what} has no key {item['key']}"
            file = path / item["path"]
            file.parent.mkdir(parents=True, exist_ok=True)
            text = data[item["key"]]
            if file.suffix in (".yaml", ".yml"):
                text = yaml.safe_dump(self.rewrite(yaml.safe_load(text)), sort_keys=False)
            file.write_text(text)
            file.chmod(item.get("mode", source.get("defaultMode", 0o644)))
            if os.geteuid() == 0:
                os.chown(file, 0, self.spec.get("securityContext", {}).get("fsGroup", 0))


@dataclass
class Child:
    """One container's process."""

    pod: str
    container: dict[str, Any]
    who: Identity
    proc: subprocess.Popen[bytes]
    log: Path
    ports: dict[str | int, int]  # port name and containerPort -> the port here

    @property
    def name(self) -> str:
        return f"{self.pod}/{self.container['name']}"

    def tail(self) -> str:
        lines = self.log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        return "\n".join(lines)


class Rehearsal:
    """The rendered pods started on this machine; `run()` does it all, or fails saying where."""

    def __init__(self, objects: list[dict[str, Any]], root: Path, cluster: Cluster) -> None:
        self.objects = objects
        self.root = root
        self.cluster = cluster
        self.img = image()
        self.ports = {
            obj["metadata"]["name"]: {
                container["name"]: {p["containerPort"]: free_port() for p in container["ports"]}
                for container in pod_spec(obj)["containers"]
                if container.get("ports")
            }
            for obj in workloads(objects)
        }
        self.urls = service_urls(objects, cluster.namespace, self.ports)
        self.children: list[Child] = []

    def run(self) -> None:
        before = {uid: self._written(uid) for uid in self._read_only_uids()}
        with ExitStack() as stack:
            stack.callback(self._kill_all)
            for obj in workloads(self.objects):
                pod = PodRoot(obj, self.root / obj["metadata"]["name"], self.cluster, self.img)
                for container in pod.spec.get("initContainers", []):
                    child = self._start(pod, container)
                    self._finish(child, READY_WITHIN_SECONDS)
                for container in pod.spec["containers"]:
                    self.children.append(self._start(pod, container))
            self._wait_ready()
            self._agents_read_nvml()
            for obj in helm_test_pods(self.objects):
                pod = PodRoot(obj, self.root / obj["metadata"]["name"], self.cluster, self.img)
                for container in all_containers(pod.spec):
                    self._finish(self._start(pod, container), TEST_POD_WITHIN_SECONDS)
            self._stop_all()
        for uid, earlier in before.items():
            written = self._written(uid) - earlier
            assert not written, f"uid {uid} wrote outside its volumes: {sorted(written)}"

    # --- one container -----------------------------------------------------------------------

    def _start(self, pod: PodRoot, container: dict[str, Any]) -> Child:
        who = identity(pod.spec, container, self.img)
        env = self._env(pod, container)
        words = [*(container.get("command") or self.img.entrypoint), *container.get("args", [])]
        argv = [self.urls(pod.rewrite(expand(word, env))) for word in words]
        ports = self.ports.get(pod.name, {}).get(container["name"], {})
        by_name = {
            p["name"]: ports[p["containerPort"]] for p in container.get("ports", []) if "name" in p
        }
        if ports:
            # The daemons take each port from the setting the chart's containerPort of that
            # name renders from: here the free port stands for it.
            command = _parser().parse_args(argv[1:]).command
            for name, port in by_name.items():
                env[f"OBSERVER_{command.upper()}__{PORT_SETTINGS[name]}"] = str(port)
        log = self.root / f"{pod.name}.{container['name']}.log"
        cwd = pod.here(container.get("workingDir", self.img.workdir))
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [*who.command(), *argv],
                env=env,
                cwd=cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return Child(pod.name, container, who, proc, log, {**ports, **by_name})

    def _env(self, pod: PodRoot, container: dict[str, Any]) -> dict[str, str]:
        env = dict(self.img.env)
        for source in container.get("envFrom", []):
            ref = source.get("secretRef") or source.get("configMapRef") or {}
            found = self.cluster.secrets if "secretRef" in source else self.cluster.config_maps
            data = found.get(ref["name"])
            assert data is not None or ref.get("optional"), f"{pod.name}: no {ref['name']}"
            env.update({source.get("prefix", "") + k: v for k, v in (data or {}).items()})
        for var in container.get("env", []):
            value = self._value(pod, var)
            if value is not None:
                env[var["name"]] = self.urls(pod.rewrite(expand(value, env)))
        if any(m["mountPath"] == "/tmp" for m in container.get("volumeMounts", [])):
            env["TMPDIR"] = pod.here("/tmp")
        if pod.automounts_token and self.cluster.kubeconfig is not None:
            env[KUBECONFIG_ENV] = pod.here(f"{SERVICE_ACCOUNT_DIR}/kubeconfig")
        env.update(self.cluster.env)
        if asks_for_gpus(pod.annotations, container):
            env.update(self.cluster.nvml)
        return env

    def _value(self, pod: PodRoot, var: dict[str, Any]) -> str | None:
        if "value" in var:
            return str(var["value"])
        source = var["valueFrom"]
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            value = self.cluster.secrets.get(ref["name"], {}).get(ref["key"])
            assert value is not None or ref.get("optional"), f"{pod.name}: no {ref}"
            return value
        if "fieldRef" in source:
            fields = {
                **{f"metadata.labels['{k}']": v for k, v in pod.labels.items()},
                "spec.nodeName": self.cluster.node_name,
                "metadata.name": pod.name,
                "metadata.namespace": self.cluster.namespace,
                "spec.serviceAccountName": pod.spec.get("serviceAccountName", "default"),
                "status.podIP": "127.0.0.1",
                "status.hostIP": "127.0.0.1",
            }
            return fields[source["fieldRef"]["fieldPath"]]
        raise AssertionError(f"{pod.name}: an env source not rehearsed: {var}")

    def _finish(self, child: Child, within_seconds: float) -> None:
        try:
            code = child.proc.wait(within_seconds)
        except subprocess.TimeoutExpired:
            child.proc.kill()
            raise AssertionError(
                f"{child.name} did not exit within {within_seconds} s:\n{child.tail()}"
            ) from None
        assert code == 0, f"{child.name} exited {code}:\n{child.tail()}"

    # --- the pods together -------------------------------------------------------------------

    def _agents_read_nvml(self) -> None:
        """Ready is not enough for an agent: one the runtime gave no driver is ready and blind
        on every node. Each says on /healthz that it reads NVML."""
        for child in self.children:
            if child.container.get("args", [])[:1] == ["agent"]:
                health = httpx.get(f"http://127.0.0.1:{child.ports['http']}/healthz").json()
                assert health["blind"] is False, f"{child.name} is blind: {health}"

    def _wait_ready(self) -> None:
        """Every rendered probe of every container answered, asked as the kubelet asks it."""
        deadline = time.monotonic() + READY_WITHIN_SECONDS
        waiting = {
            (child.name, kind): (child, probe)
            for child in self.children
            for kind in ("startupProbe", "livenessProbe", "readinessProbe")
            if (probe := child.container.get(kind))
        }
        problems: dict[tuple[str, str], str] = {}
        while True:
            for key, (child, probe) in list(waiting.items()):
                assert child.proc.poll() is None, (
                    f"{child.name} exited {child.proc.returncode} before it was ready:\n"
                    f"{child.tail()}"
                )
                problem = ask(probe, child.ports)
                if problem is None:
                    del waiting[key]
                else:
                    problems[key] = problem
            if not waiting:
                return
            if time.monotonic() > deadline:
                unready = {f"{name} {kind}": problems[(name, kind)] for name, kind in waiting}
                tails = "\n".join(f"{c.name}:\n{c.tail()}" for c in self.children)
                raise AssertionError(
                    f"not ready within {READY_WITHIN_SECONDS} s: {unready}\n{tails}"
                )
            time.sleep(POLL_SECONDS)

    def _stop_all(self) -> None:
        """SIGTERM, as the kubelet stops a pod; each must exit 0 within its grace period."""
        for child in self.children:
            child.proc.terminate()
        for child in self.children:
            grace = self._grace_seconds(child.pod)
            self._finish(child, grace)

    def _grace_seconds(self, pod: str) -> float:
        (obj,) = [o for o in workloads(self.objects) if o["metadata"]["name"] == pod]
        seconds: float = pod_spec(obj).get("terminationGracePeriodSeconds", 30)
        return seconds

    def _kill_all(self) -> None:
        for child in self.children:
            if child.proc.poll() is None:
                child.proc.kill()
                child.proc.wait()

    def _read_only_uids(self) -> set[int]:
        """The non-root users of read-only root filesystems, when the tests can be them."""
        if os.geteuid() != 0:
            return set()
        return {
            who.uid
            for obj in [*workloads(self.objects), *helm_test_pods(self.objects)]
            for container in all_containers(pod_spec(obj))
            if (who := identity(pod_spec(obj), container, self.img)).read_only_root and who.uid
        }

    def _written(self, uid: int) -> set[str]:
        """The files of `uid` in this machine's world-writable directories, but the pods' (of
        this rehearsal and of any other running beside it on another xdist worker)."""
        pods = ["-path", str(self.root.parent / f"{ROOT_PREFIX}*"), "-prune"]
        found = subprocess.run(
            ["find", *WORLD_WRITABLE, "-xdev", *pods, "-o", "-user", str(uid), "-print"],
            capture_output=True,
            text=True,
            check=False,
        )
        return set(found.stdout.splitlines())


def expand(text: str, env: Mapping[str, str]) -> str:
    """$(VAR) from the container's environment, as the kubelet expands command, args and env;
    $$ is a literal $ and an unknown $(VAR) stays as it is."""
    return re.sub(
        r"\$\$|\$\((\w+)\)",
        lambda m: "$" if m[0] == "$$" else env.get(m[1], m[0]),
        text,
    )


def ask(probe: dict[str, Any], ports: Mapping[str | int, int]) -> str | None:
    """None when the probe succeeds, else what it got."""
    timeout = probe.get("timeoutSeconds", 1)
    if "httpGet" in probe:
        get = probe["httpGet"]
        url = f"{get.get('scheme', 'HTTP').lower()}://{get.get('host', '127.0.0.1')}"
        url += f":{ports[get['port']]}{get.get('path', '/')}"
        headers = {h["name"]: h["value"] for h in get.get("httpHeaders", [])}
        try:
            # The kubelet does not check the certificate, and takes 200-399 as success.
            answer = httpx.get(url, headers=headers, timeout=timeout, verify=False)
        except httpx.HTTPError as exc:
            return f"{url}: {exc!r}"
        return None if 200 <= answer.status_code < 400 else f"{url}: {answer.status_code}"
    if "tcpSocket" in probe:
        port = ports[probe["tcpSocket"]["port"]]
        try:
            with socket.create_connection(
                (probe["tcpSocket"].get("host", "127.0.0.1"), port), timeout
            ):
                return None
        except OSError as exc:
            return f"tcp {port}: {exc}"
    raise AssertionError(f"a probe the rehearsal does not ask: {probe}")


class ServiceUrls:
    """http(s)://<a Service's DNS name>:<its port> -> 127.0.0.1:<the selected container's port>."""

    def __init__(self, here: Mapping[str, str]) -> None:
        self.here = here
        names = sorted(here, key=len, reverse=True)
        self.pattern = (
            re.compile(r"(?<=://)(" + "|".join(map(re.escape, names)) + r")(?![\w.:-])")
            if names
            else None
        )

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str) and self.pattern is not None:
            return self.pattern.sub(lambda m: self.here[m[1]], value)
        return value


def service_urls(
    objects: list[dict[str, Any]],
    namespace: str,
    ports: Mapping[str, Mapping[str, Mapping[int, int]]],
) -> ServiceUrls:
    here: dict[str, str] = {}
    for service in (o for o in objects if o["kind"] == "Service"):
        selector = service["spec"].get("selector", {}).items()
        for obj in workloads(objects):
            if not selector <= obj["spec"]["template"]["metadata"]["labels"].items():
                continue
            for service_port in service["spec"]["ports"]:
                target = service_port.get("targetPort", service_port["port"])
                for container in pod_spec(obj)["containers"]:
                    for port in container.get("ports", []):
                        if target not in (port.get("name"), port["containerPort"]):
                            continue
                        local = ports[obj["metadata"]["name"]][container["name"]]
                        for host in dns_names(service["metadata"]["name"], namespace):
                            here[f"{host}:{service_port['port']}"] = (
                                f"127.0.0.1:{local[port['containerPort']]}"
                            )
    return ServiceUrls(here)


def dns_names(service: str, namespace: str) -> Iterator[str]:
    yield service
    yield f"{service}.{namespace}"
    yield f"{service}.{namespace}.svc"
    yield f"{service}.{namespace}.svc.cluster.local"


def kubeconfig(server: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": {"server": server}}],
            "users": [{"name": "observer", "user": {}}],
            "contexts": [
                {"name": "emulator", "context": {"cluster": "emulator", "user": "observer"}}
            ],
            "current-context": "emulator",
        }
    )
