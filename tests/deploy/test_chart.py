"""The Helm chart as a platform team reads it: `helm lint` and `helm template` over several
value sets, and what the rendered objects promise (security, RBAC, secrets, placement)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import observer
from observer.controller.compose import log_reader_preconditions
from observer.settings import Settings, load_settings
from observer.storage.upgrades import HELM_NAMESPACE_ENV, HELM_RELEASE_ENV, Installation
from tests.deploy.chart import (
    CHART,
    CI_VALUES,
    DASHBOARDS,
    REPO,
    all_containers,
    config_of,
    helm_args,
    kinds,
    one,
    pod_spec,
    render,
    run,
    tool,
)

pytestmark = pytest.mark.chart

VALUE_SETS = [None, *CI_VALUES]
VALUE_IDS = ["defaults", *(p.name.removesuffix("-values.yaml") for p in CI_VALUES)]
WORKLOADS = ("DaemonSet", "Deployment", "Pod")
READ_ONLY = {"get", "list", "watch"}


@pytest.fixture(scope="module")
def helm() -> Path:
    return tool("helm")


@pytest.fixture(scope="module")
def rendered(helm: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        name: render(helm, *([values] if values else []))
        for name, values in zip(VALUE_IDS, VALUE_SETS, strict=True)
    }


def ci_values(name: str) -> Path:
    return CHART / "ci" / f"{name}-values.yaml"


# --- every value set ------------------------------------------------------------------------


@pytest.mark.parametrize("values", VALUE_SETS, ids=VALUE_IDS)
def test_lint_passes_strictly(helm: Path, values: Path | None):
    result = run(helm, "lint", "--strict", CHART, *helm_args(*([values] if values else [])))
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("values", VALUE_SETS, ids=VALUE_IDS)
def test_install_notes_render(helm: Path, values: Path | None):
    result = run(
        helm,
        "install",
        "--dry-run=client",
        "observer",
        CHART,
        "--namespace",
        "gpu-soak",
        *helm_args(*([values] if values else [])),
    )
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "helm test observer -n gpu-soak" in notes
    tenants = yaml.safe_load(values.read_text()).get("settings", {}) if values else {}
    warned = "WARNING: no tenant is configured" in notes
    assert warned == (not tenants.get("controller", {}).get("tenants")), notes


def test_packaged_chart_carries_dashboards_and_rules(helm: Path, tmp_path: Path):
    run(helm, "package", CHART, "--destination", tmp_path)
    (package,) = tmp_path.glob("observer-*.tgz")
    out = run(helm, "template", "observer", package, "-f", ci_values("monitoring")).stdout
    objects = [doc for doc in yaml.safe_load_all(out) if doc]
    assert (
        len([o for o in kinds(objects, "ConfigMap") if "-dashboard-" in o["metadata"]["name"]]) == 5
    )
    assert one(objects, "PrometheusRule")["spec"]["groups"]


@pytest.mark.parametrize("name", VALUE_IDS)
def test_settings_file_is_valid_for_the_observer(rendered, name: str, tmp_path: Path):
    """The ConfigMap is what both processes load: the observer's own validation accepts it."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(config_of(rendered[name])))
    settings = load_settings(config)
    assert str(settings.agent.proc_root) == "/host/proc"
    assert str(settings.storage.sqlite_path) == "/var/lib/observer/observer.db"
    assert settings.storage.url is None


def test_the_stores_budget_is_a_value_beside_the_chart_owned_path(helm: Path, tmp_path: Path):
    objects = render(
        helm,
        sets={
            "settings.storage.raw_retention_days": "14",
            "settings.storage.space_warning_days": "5",
        },
    )
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(config_of(objects)))
    storage = load_settings(config).storage
    assert (storage.raw_retention_days, storage.space_warning_days) == (14, 5)
    assert str(storage.sqlite_path) == "/var/lib/observer/observer.db"


@pytest.mark.parametrize("name", VALUE_IDS)
def test_every_container_is_locked_down_and_sized(rendered, name: str):
    for obj in (o for o in rendered[name] if o["kind"] in WORKLOADS):
        spec = pod_spec(obj)
        pod_seccomp = spec.get("securityContext", {}).get("seccompProfile", {}).get("type")
        for container in all_containers(spec):
            where = f"{obj['kind']}/{obj['metadata']['name']}/{container['name']}"
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc.get("privileged", False) is False, where
            assert sc["capabilities"] == {"drop": ["ALL"]}, where
            assert "RuntimeDefault" in (sc.get("seccompProfile", {}).get("type"), pod_seccomp), (
                where
            )
            resources = container["resources"]
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= resources[kind].keys(), where
                assert not any(key.startswith("nvidia.com/") for key in resources[kind]), where
        if obj["metadata"]["name"].endswith("-agent"):
            continue  # uid 0 without capabilities by default: see values.yaml agent
        assert spec["securityContext"]["runAsNonRoot"] is True, obj["metadata"]["name"]


SECRET_KEYS = re.compile(r"url|password|secret|webhook|token")


def is_reference(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and set(value) <= {"env", "file"}


def secret_looking(tree: Any, path: str = "") -> list[str]:
    """Paths in a settings tree that hold what looks like a secret value: a key that names
    one (unless its values are files mounted from Secrets), or a URL with credentials."""
    found = []
    if isinstance(tree, dict):
        for key, value in tree.items():
            where = f"{path}.{key}".lstrip(".")
            if key == "tenant_token_files":
                assert all(v.startswith("/var/run/secrets/") for v in value.values()), value
            # image_pull_secrets: the names of Secrets, not what they hold. A log backend's
            # url holds no secret unless it carries credentials (checked as any string);
            # its credentials are references: {env: NAME} or {file: PATH}.
            elif (
                SECRET_KEYS.search(key)
                and key not in ("agent_urls", "image_pull_secrets")
                and not (where.startswith("controller.logs.") and key == "url")
                and not is_reference(value)
            ):
                found.append(where)
            else:
                found += secret_looking(value, where)
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            found += secret_looking(value, f"{path}.{i}")
    elif isinstance(tree, str) and re.search(r"://[^/@]+@", tree):
        found.append(path)
    return found


@pytest.mark.parametrize("name", VALUE_IDS)
def test_no_secret_is_rendered_or_inlined(rendered, name: str):
    assert not kinds(rendered[name], "Secret"), "secrets are referenced, never rendered"
    assert secret_looking(config_of(rendered[name])) == []
    for obj in rendered[name]:
        if obj["kind"] not in WORKLOADS:
            continue
        for container in all_containers(pod_spec(obj)):
            variables = container.get("env", [])
            # a setting made per pod from the downward API (the node's IP) cannot be in the
            # shared config: the only value an OBSERVER_ variable may carry
            downward = {v["name"] for v in variables if "fieldRef" in v.get("valueFrom", {})}
            for env in variables:
                if env["name"].startswith("OBSERVER_") and "value" in env:
                    assert (
                        re.findall(r"\$\((\w+)\)", env["value"])
                        and set(re.findall(r"\$\((\w+)\)", env["value"])) <= downward
                    ), f"{env['name']} is inlined in {obj['metadata']['name']}"


def test_the_secret_check_is_not_vacuous():
    assert secret_looking({"storage": {"url": "postgresql://u:p@db/x"}}) == ["storage.url"]
    assert secret_looking({"a": ["http://user:pw@host/"]}) == ["a.0"]
    assert secret_looking({"controller": {"agent_urls": ["http://node:9400"]}}) == []
    loki = {"url": "http://u:p@loki/", "auth": {"password": "hunter2"}}
    assert secret_looking({"controller": {"logs": {"loki": loki}}}) == [
        "controller.logs.loki.url",
        "controller.logs.loki.auth.password",
    ]
    loki = {"url": "http://loki/", "auth": {"password": {"env": "OBSERVER_LOKI_PASSWORD"}}}
    assert secret_looking({"controller": {"logs": {"loki": loki}}}) == []


WRITABLE = {("batch", "jobs"), ("apps", "deployments"), ("", "services")}


@pytest.mark.parametrize("name", VALUE_IDS)
def test_rbac_is_least_privilege(rendered, name: str):
    objects = rendered[name]
    for role in kinds(objects, "ClusterRole"):
        for rule in role["rules"]:
            assert set(rule["verbs"]) <= READ_ONLY, rule
            assert "*" not in rule["resources"] + rule["apiGroups"], rule
            assert not {"secrets", "jobs", "configmaps"} & set(rule["resources"]), rule
    for role in kinds(objects, "Role"):
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
            if set(rule["verbs"]) - READ_ONLY:  # probe Jobs, the inference probe's service
                written = {(g, r) for g in rule["apiGroups"] for r in rule["resources"]}
                assert written <= WRITABLE, rule
    writers = {
        role["metadata"]["namespace"]
        for role in kinds(objects, "Role")
        for rule in role["rules"]
        if set(rule["verbs"]) - READ_ONLY
    }
    config = config_of(objects)
    probe_namespaces = set(config["controller"].get("kubernetes", {}).get("namespaces", []))
    assert writers <= probe_namespaces
    assert not kinds(objects, "ClusterRoleBinding") or kinds(objects, "ClusterRole")


# --- agent ------------------------------------------------------------------------------------


def test_agent_sees_host_pids_and_gpus_without_requesting_one(rendered):
    ds = one(rendered["defaults"], "DaemonSet")
    spec = pod_spec(ds)
    assert spec["hostPID"] is True
    assert spec["automountServiceAccountToken"] is False
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    (agent,) = spec["containers"]
    assert agent["args"] == ["agent", "--config", "/etc/observer/config.yaml"]
    env = {e["name"]: e for e in agent["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"
    assert env["OBSERVER_AGENT__NODE_NAME"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "spec.nodeName"}
    }
    mounts = {m["mountPath"]: m for m in agent["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert mounts["/host/proc"]["readOnly"] is True
    assert volumes[mounts["/host/proc"]["name"]]["hostPath"]["path"] == "/proc"
    socket_dir = mounts["/var/lib/kubelet/pod-resources"]
    assert socket_dir["readOnly"] is True
    assert volumes[socket_dir["name"]]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    assert all(m.get("readOnly") for m in agent["volumeMounts"] if m["mountPath"] != "/tmp")
    assert "add" not in agent["securityContext"]["capabilities"]
    assert agent["ports"] == [
        {"name": "http", "containerPort": 9400, "protocol": "TCP"},
        {"name": "metrics", "containerPort": 9402, "protocol": "TCP"},
    ]
    assert agent["livenessProbe"]["httpGet"]["path"] == "/healthz"
    service = one(rendered["defaults"], "Service", "-agent")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    controller = config_of(rendered["defaults"])["controller"]
    assert controller["agent_dns_name"] == "observer-agent.gpu-soak.svc"
    assert controller["agent_port"] == service["spec"]["ports"][0]["port"] == 9400
    assert config_of(rendered["defaults"])["agent"]["proc_root"] == "/host/proc"


def test_config_changes_restart_only_the_processes_that_read_them(helm: Path):
    def checksums(sets: dict[str, str]) -> tuple[str, str]:
        objects = render(helm, sets=sets)
        return tuple(
            one(objects, kind)["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
            for kind in ("DaemonSet", "Deployment")
        )

    base = checksums({})
    controller_only = checksums({"settings.controller.timezone": "Asia/Shanghai"})
    agent_too = checksums({"settings.agent.interval_seconds": "2"})
    assert controller_only[0] == base[0] and controller_only[1] != base[1]
    assert agent_too[0] != base[0] and agent_too[1] != base[1]


def test_agent_placement_and_user_follow_values(rendered):
    spec = pod_spec(one(rendered["gpu-nodes"], "DaemonSet"))
    values = yaml.safe_load(ci_values("gpu-nodes").read_text())["agent"]
    assert values["nodeSelector"]["nvidia.com/gpu.present"] is None  # drops the default
    assert spec["nodeSelector"] == {"node-role.example.com/gpu": "true"}
    assert spec["tolerations"] == values["tolerations"]
    assert spec["affinity"] == values["affinity"]
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert "/var/lib/kubelet/pod-resources" not in {
        m["mountPath"] for m in spec["containers"][0]["volumeMounts"]
    }
    assert config_of(rendered["gpu-nodes"])["agent"]["interval_seconds"] == 2


# --- controller -------------------------------------------------------------------------------


def test_controller_is_one_replica_replaced_not_overlapped(rendered):
    objects = rendered["defaults"]
    deploy = one(objects, "Deployment")
    assert deploy["spec"]["replicas"] == 1
    assert deploy["spec"]["strategy"] == {"type": "Recreate"}
    spec = pod_spec(deploy)
    shutdown = config_of(objects)["controller"]["shutdown_deadline_seconds"]
    assert spec["terminationGracePeriodSeconds"] > shutdown
    (init,) = spec["initContainers"]
    (main,) = spec["containers"]
    assert init["args"] == ["db", "upgrade", "--config", "/etc/observer/config.yaml"]
    assert main["args"] == ["controller", "--config", "/etc/observer/config.yaml"]
    assert init["volumeMounts"] == main["volumeMounts"]
    assert main["readinessProbe"]["httpGet"]["path"] == "/healthz"
    pdb = one(objects, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1, "one replica: minAvailable 1 would block drains"
    assert pdb["spec"]["selector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]
    pvc = one(objects, "PersistentVolumeClaim")
    assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    data = next(v for v in spec["volumes"] if v["name"] == "data")
    assert data["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    assert {"mountPath": "/var/lib/observer", "name": "data"} in main["volumeMounts"]
    assert spec["securityContext"]["fsGroup"] == 65532


def test_the_init_container_gets_the_helm_release_a_rollback_refusal_names(helm: Path):
    objects = render(helm, CHART / "ci" / "postgres-values.yaml", release="soak", namespace="gpu")
    deploy = one(objects, "Deployment")
    template = deploy["spec"]["template"]
    (init,) = pod_spec(deploy)["initContainers"]
    env = {e["name"]: e for e in init["env"]}

    # what the kubelet gives it: the pod's own label and namespace, as the API server sets them
    pod = {"labels": template["metadata"]["labels"], "namespace": deploy["metadata"]["namespace"]}
    given = {
        name: downward(env[name]["valueFrom"]["fieldRef"]["fieldPath"], pod)
        for name in (HELM_RELEASE_ENV, HELM_NAMESPACE_ENV)
    }
    assert Installation.from_environment(given) == Installation(observer.__version__, "soak", "gpu")
    assert "OBSERVER_STORAGE__URL" in env, "and the store it migrates"
    # the refusal names the release by the version it records, which `helm history` shows
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == observer.__version__


def downward(path: str, pod: dict[str, Any]) -> str:
    """The value of a fieldRef: `metadata.namespace` or `metadata.labels['key']`."""
    if path == "metadata.namespace":
        return str(pod["namespace"])
    label = re.fullmatch(r"metadata\.labels\['(.+)'\]", path)
    assert label, path
    return str(pod["labels"][label[1]])


def test_postgresql_url_and_notification_secrets_come_from_secrets(rendered):
    objects = rendered["postgres"]
    spec = pod_spec(one(objects, "Deployment"))
    for container in all_containers(spec):
        env = {e["name"]: e for e in container["env"]}
        assert env["OBSERVER_STORAGE__URL"]["valueFrom"] == {
            "secretKeyRef": {"name": "observer-db", "key": "url"}
        }
        assert env["OBSERVER_REPORTS__DELIVERY__FEISHU_SECRET"]["valueFrom"]["secretKeyRef"] == {
            "name": "observer-notify",
            "key": "feishu-secret",
        }
        assert env["OBSERVER_REPORTS__DELIVERY__EMAIL__PASSWORD"]["valueFrom"]["secretKeyRef"][
            "optional"
        ]
        assert container["envFrom"] == [{"secretRef": {"name": "observer-extra-env"}}]
    assert "url" not in config_of(objects)["storage"]


def test_log_reader_credentials_are_a_reference_filled_from_a_secret(rendered, monkeypatch):
    objects = rendered["loki-logs"]
    logs = config_of(objects)["controller"]["logs"]
    assert (logs["reader"], logs["loki"]["tenant"]) == ("loki", "soak")
    assert logs["loki"]["auth"]["password"] == {"env": "OBSERVER_LOKI_PASSWORD"}
    spec = pod_spec(one(objects, "Deployment"))
    (controller,) = spec["containers"]
    env = {e["name"]: e for e in controller["env"]}
    assert env["OBSERVER_LOKI_PASSWORD"]["valueFrom"] == {
        "secretKeyRef": {"name": "loki-observer", "key": "password"}
    }
    # the controller refuses to start, as check-config does, until the variable is there
    settings = Settings.model_validate(config_of(objects))
    assert log_reader_preconditions(settings.controller) == [
        "controller.logs.loki.auth.password.env: OBSERVER_LOKI_PASSWORD is not set"
    ]
    monkeypatch.setenv("OBSERVER_LOKI_PASSWORD", "from-the-secret")
    assert log_reader_preconditions(settings.controller) == []


# --- RBAC by backend --------------------------------------------------------------------------


def test_kubernetes_backend_can_run_jobs_only_in_probe_namespaces(rendered):
    """Which verbs and resources: tests/deploy/test_chart_rbac.py, from the backend's calls."""
    objects = rendered["kubernetes"]
    namespaces = ["team-a", "team-b", "shared-batch"]
    assert config_of(objects)["controller"]["kubernetes"]["namespaces"] == namespaces
    assert sorted(r["metadata"]["namespace"] for r in kinds(objects, "Role")) == sorted(namespaces)
    assert pod_spec(one(objects, "Deployment"))["automountServiceAccountToken"] is True


def test_isolation_probe_tokens_are_mounted_from_secrets(rendered):
    objects = rendered["kubernetes"]
    files = config_of(objects)["controller"]["kubernetes"]["tenant_token_files"]
    assert files == {"team-a": "/var/run/secrets/observer/tenants/team-a/token"}
    spec = pod_spec(one(objects, "Deployment"))
    volume = next(v for v in spec["volumes"] if v["name"] == "token-team-a")
    assert volume["secret"]["secretName"] == "team-a-probe-token"
    assert volume["secret"]["items"] == [{"key": "token", "path": "token"}]
    mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "token-team-a")
    assert mount == {
        "name": "token-team-a",
        "mountPath": "/var/run/secrets/observer/tenants/team-a",
        "readOnly": True,
    }


def test_slurm_backend_gets_no_kubernetes_access(rendered):
    objects = rendered["slurm"]
    for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "DaemonSet"):
        assert not kinds(objects, kind), kind
    assert pod_spec(one(objects, "Deployment"))["automountServiceAccountToken"] is False


# --- monitoring -------------------------------------------------------------------------------


def test_monitoring_objects_are_off_by_default(rendered):
    for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule"):
        assert not kinds(rendered["defaults"], kind), kind


def test_service_monitors_name_the_jobs_the_alerts_use(rendered):
    objects = rendered["monitoring"]
    monitors = {m["metadata"]["name"]: m for m in kinds(objects, "ServiceMonitor")}
    assert sorted(monitors) == ["observer-agent", "observer-controller"]
    for name, monitor in monitors.items():
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        (endpoint,) = monitor["spec"]["endpoints"]
        # the agent's metrics port, without /v1/snapshot (tests/deploy/test_networkpolicy.py)
        assert (
            endpoint["port"] == {"observer-agent": "metrics", "observer-controller": "http"}[name]
        )
        assert endpoint["interval"] == "15s"
        assert {"targetLabel": "job", "replacement": name} in endpoint["relabelings"]
    rule = one(objects, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    exprs = "\n".join(a["expr"] for g in rule["spec"]["groups"] for a in g["rules"])
    assert 'up{job="observer-agent"}' in exprs and 'up{job="observer-controller"}' in exprs
    names = [a["alert"] for g in rule["spec"]["groups"] for a in g["rules"]]
    assert "ObserverAgentsAbsent" not in names and "ObserverAgentDown" in names
    for group in rule["spec"]["groups"]:
        for alert in group["rules"]:
            assert alert["labels"]["team"] == "gpu-platform"
            assert alert["annotations"]["runbook_url"] == (
                f"https://runbooks.example.com/gpu-soak-observer#{alert['alert'].lower()}"
            )


def test_pod_monitors_and_rule_jobs_follow_values(rendered):
    objects = rendered["podmonitor"]
    assert not kinds(objects, "ServiceMonitor")
    jobs = {
        m["metadata"]["name"]: m["spec"]["podMetricsEndpoints"][0]["relabelings"][0]["replacement"]
        for m in kinds(objects, "PodMonitor")
    }
    assert jobs == {
        "observer-agent": "gpu-observer-agent",
        "observer-controller": "gpu-observer-controller",
    }
    exprs = "\n".join(
        a["expr"] for g in one(objects, "PrometheusRule")["spec"]["groups"] for a in g["rules"]
    )
    assert 'up{job="gpu-observer-controller"}' in exprs


def test_both_monitors_at_once_are_refused(helm: Path):
    result = run(
        helm,
        "template",
        "observer",
        CHART,
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "podMonitor.enabled=true",
        check=False,
    )
    assert result.returncode != 0
    assert "enable one of the two" in result.stderr


def test_dashboards_ship_as_labelled_config_maps(rendered):
    maps = [
        m
        for m in kinds(rendered["monitoring"], "ConfigMap")
        if "-dashboard-" in m["metadata"]["name"]
    ]
    assert len(maps) == len(DASHBOARDS) == 5
    for cm in maps:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert cm["metadata"]["annotations"] == {"grafana_folder": "GPU Soak"}
        ((filename, text),) = cm["data"].items()
        assert json.loads(text) == json.loads((CHART / "dashboards" / filename).read_text())


def test_helm_test_pod_asks_the_controller(rendered):
    pod = one(rendered["defaults"], "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (check,) = pod["spec"]["containers"]
    assert check["args"][1] == "http://observer-controller:9401"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


# --- values.schema.json -----------------------------------------------------------------------

BAD_VALUES = {
    "unknown top-level key": ("replicas: 2", "additional properties 'replicas' not allowed"),
    "unknown setting": ("settings: {agent: {interval: 1}}", "additional properties 'interval'"),
    "database URL inlined": (
        "settings: {storage: {url: 'postgresql://u:p@db/observer'}}",
        "additional properties 'url' not allowed",
    ),
    "chart-owned setting": ("settings: {agent: {proc_root: /proc}}", "'proc_root' not allowed"),
    "wrong type": ("settings: {agent: {interval_seconds: fast}}", "want number"),
    "out of bounds": ("settings: {agent: {shutdown_deadline_seconds: 45}}", "shutdown_deadline"),
    "unknown backend": (
        "settings: {controller: {backend: nomad}}",
        "at '/settings/controller/backend': value must be one of",
    ),
    "bad window time": (
        "settings: {controller: {windows: [{name: w, start: '25:00', end: '06:00'}]}}",
        "does not match pattern",
    ),
    "GPU requested": (
        "agent: {resources: {requests: {nvidia.com/gpu: 1}}}",
        "at '/agent/resources/requests': additional properties 'nvidia.com/gpu' not allowed",
    ),
    "free-form resources": (
        "controller: {resources: {request: {cpu: 1}}}",
        "at '/controller/resources': additional properties 'request' not allowed",
    ),
    "not a quantity": (
        "agent: {resources: {limits: {memory: 256MB}}}",
        "at '/agent/resources/limits/memory'",
    ),
    "negative quantity": (
        "controller: {resources: {requests: {cpu: -1}}}",
        "at '/controller/resources/requests/cpu'",
    ),
    "update strategy": (
        "agent: {updateStrategy: {type: Foo}}",
        "at '/agent/updateStrategy/type': value must be one of 'RollingUpdate', 'OnDelete'",
    ),
    "rolling update budget": (
        "agent: {updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: all}}}",
        "at '/agent/updateStrategy/rollingUpdate/maxUnavailable'",
    ),
    "unknown timezone": (
        "settings: {controller: {timezone: Mars/Olympus}}",
        "at '/settings/controller/timezone': value must be one of",
    ),
    "network policy selector": (
        "networkPolicy: {prometheus: {podSelector: {app: prometheus}}}",
        "at '/networkPolicy/prometheus/podSelector'",
    ),
    "secret env name": (
        "controller: {secretEnv: [{name: smtp_password, secretName: s, key: k}]}",
        "does not match pattern",
    ),
    "pull policy": ("image: {pullPolicy: Sometimes}", "at '/image/pullPolicy'"),
    "log reader without its backend": (
        "settings: {controller: {logs: {reader: loki, loki: {selector: '{app=\"x\"}'}}}}",
        "at '/settings/controller/logs/loki/url': got null, want string",
    ),
    "files reader without a pattern": (
        "settings: {controller: {logs: {reader: files}}}",
        "at '/settings/controller/logs/files/pattern'",
    ),
}


@pytest.mark.parametrize("case", list(BAD_VALUES))
def test_schema_rejects_bad_values(helm: Path, tmp_path: Path, case: str):
    text, message = BAD_VALUES[case]
    values = tmp_path / "values.yaml"
    values.write_text(text + "\n")
    for command in (["template", "observer"], ["lint", "--strict"]):
        result = run(helm, *command, CHART, "-f", values, check=False)
        assert result.returncode != 0, (case, command)
        output = result.stdout + result.stderr
        assert "values don't meet the specifications of the schema" in output, output
        assert message in output, output


def test_values_schema_mirrors_the_settings_model():
    result = subprocess.run(
        [sys.executable, str(REPO / "deploy" / "chart-tools" / "values_schema.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
