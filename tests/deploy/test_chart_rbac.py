"""The controller's RBAC grants exactly what the Kubernetes backend calls, read from the source
of every module of its package: a call is checked in whichever module makes it.

Every method of its API objects the adapter calls or hands to an informer
(`self._core.list_node`) names its verb and resource: list_* -> list (watch when called with
`watch=True`: the informers'), read_* -> get, create_* -> create, delete_* -> delete, patch_*
-> patch; `namespaced` calls are made in the probe namespaces (a Role in each), the others
(`list_node`, `*_for_all_namespaces`) cluster-wide (the ClusterRole). A custom-object call
(`self._custom.list_namespaced_custom_object(...)`, `list_cluster_custom_object`; watch with
`watch=True`) reaches each CustomResource of its scope the adapter names (Kueue's,
Volcano's: `namespaced=False` names a cluster-scoped one). The isolation probe's calls
(isolation.py) run with a tenant's own token, not the controller's, and are not here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.chart import REPO, config_of, kinds, one, render, tool

pytestmark = pytest.mark.chart

KUBERNETES = REPO / "observer" / "backends" / "kubernetes"
CONNECTION = KUBERNETES / "client.py"
ISOLATION = KUBERNETES / "isolation.py"  # a tenant's calls, not the controller's
ADAPTER = sorted(set(KUBERNETES.glob("*.py")) - {ISOLATION})
VERBS = {
    "list": "list",
    "watch": "watch",
    "read": "get",
    "create": "create",
    "delete": "delete",
    "patch": "patch",
}
SUBRESOURCES = ("log", "status", "scale", "exec", "eviction", "binding")
CUSTOM_OBJECTS = "CustomObjectsApi"

Grant = tuple[str, str, str]  # (apiGroup, resource, verb)


def api_group(api_class: str) -> str:
    """CoreV1Api -> "" (the core group), BatchV1Api -> "batch"."""
    group = re.fullmatch(r"([A-Z][a-z]+)V\d+(?:(?:alpha|beta)\d+)?Api", api_class)
    assert group, f"an API class the test cannot name the group of: {api_class}"
    return "" if group[1] == "Core" else group[1].lower()


def grant(api_class: str, method: str, watch: bool = False) -> tuple[Grant, bool]:
    """A client method's (apiGroup, resource, verb), and whether it is namespaced."""
    action, _, rest = method.partition("_")
    action = "watch" if watch and action == "list" else action
    assert action in VERBS, f"{api_class}.{method}: a verb the test does not map"
    cluster_wide = rest.endswith("_for_all_namespaces") or not rest.startswith("namespaced_")
    kind = rest.removesuffix("_for_all_namespaces").removeprefix("namespaced_")
    # resource_quota -> resourcequotas; pod_log -> pods/log
    head, _, last = kind.rpartition("_")
    kind, subresource = (head, last) if head and last in SUBRESOURCES else (kind, "")
    resource = f"{kind.replace('_', '')}s" + (f"/{subresource}" if subresource else "")
    return (api_group(api_class), resource, VERBS[action]), not cluster_wide


def api_attributes() -> dict[str, str]:
    """Apis' attributes and the client classes they are: {"core": "CoreV1Api", ...}."""
    found = {}
    for node in ast.walk(ast.parse(CONNECTION.read_text())):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr.endswith("Api")
        ):
            for target in node.targets:
                assert isinstance(target, ast.Attribute), ast.unparse(node)
                found[target.attr] = node.value.func.attr
    return found


def self_attribute(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr if node.value.id == "self" else None
    return None


def custom_grants(
    trees: list[ast.Module], method: str, watch: bool = False
) -> tuple[set[Grant], bool]:
    """A custom-object method's grant on every CustomResource(group, version, plural,
    namespaced=...) of its scope the adapter names: list_namespaced_custom_object -> list on
    the namespaced ones (watch with `watch=True`), list_cluster_custom_object -> list on the
    cluster-scoped ones."""
    action, _, rest = method.partition("_")
    assert action in VERBS and rest.endswith("custom_object"), method
    action = "watch" if watch and action == "list" else action
    in_namespace = rest.startswith("namespaced_")
    named = []
    for node in (node for tree in trees for node in ast.walk(tree)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "CustomResource"
        ):
            args = [arg.value for arg in node.args if isinstance(arg, ast.Constant)]
            scope = {k.arg: k.value for k in node.keywords}
            namespaced = scope.get("namespaced", ast.Constant(True))
            assert isinstance(namespaced, ast.Constant), ast.unparse(node)
            named.append((args, namespaced.value))
    assert named and all(len(args) == 3 for args, _ in named), named
    rules = {
        (str(group), str(plural), VERBS[action])
        for (group, _, plural), namespaced in named
        if namespaced == in_namespace
    }
    return rules, in_namespace


def aliases_of(tree: ast.Module, classes: dict[str, str]) -> dict[str, str]:
    """A module's attributes for the API objects: self._core -> CoreV1Api, from
    `self._core = self._apis.core` (or `= apis.core`)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets[0]
            pairs = (
                zip(targets.elts, node.value.elts, strict=True)
                if isinstance(targets, ast.Tuple) and isinstance(node.value, ast.Tuple)
                else [(targets, node.value)]
            )
            for target, value in pairs:
                name = self_attribute(target)
                if name and isinstance(value, ast.Attribute) and value.attr in classes:
                    aliases[name] = classes[value.attr]
    return aliases


def called_grants() -> tuple[set[Grant], set[Grant]]:
    """(cluster-wide, namespaced) grants of every API call the adapter's modules make."""
    classes = api_attributes()
    trees = [ast.parse(module.read_text()) for module in ADAPTER]
    cluster: set[Grant] = set()
    namespaced: set[Grant] = set()
    used: set[str] = set()
    for tree in trees:
        aliases = aliases_of(tree, classes)
        used |= set(aliases.values())
        watching = {  # the methods called with watch=True: the informers' watches
            id(node.func)
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and any(k.arg == "watch" and getattr(k.value, "value", None) for k in node.keywords)
        }
        # Every method named, called here or handed to an informer that calls it.
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                api_class = aliases.get(self_attribute(node.value) or "")
                if api_class == CUSTOM_OBJECTS:
                    rules, in_namespace = custom_grants(trees, node.attr, id(node) in watching)
                    (namespaced if in_namespace else cluster).update(rules)
                elif api_class:
                    rule, in_namespace = grant(api_class, node.attr, id(node) in watching)
                    (namespaced if in_namespace else cluster).add(rule)
    assert used == set(classes.values()), used
    return cluster, namespaced


def granted(role: dict[str, Any]) -> set[Grant]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


KUBERNETES_VALUES = REPO / "helm" / "observer" / "ci" / "kubernetes-values.yaml"
SERVICE_RESOURCES = {("apps", "deployments"), ("", "services")}  # the inference probe's


def without_service(grants: set[Grant]) -> set[Grant]:
    return {g for g in grants if (g[0], g[1]) not in SERVICE_RESOURCES}


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return render(tool("helm"), KUBERNETES_VALUES)


@pytest.fixture(scope="module")
def with_inference() -> list[dict[str, Any]]:
    sets = {"settings.controller.inference.enabled": "true"}
    return render(tool("helm"), KUBERNETES_VALUES, sets=sets)


def test_the_call_reader_names_verbs_resources_and_scope():
    assert grant("CoreV1Api", "read_namespaced_pod_log") == (("", "pods/log", "get"), True)
    assert grant("CoreV1Api", "list_pod_for_all_namespaces") == (("", "pods", "list"), False)
    assert grant("CoreV1Api", "list_node") == (("", "nodes", "list"), False)
    assert grant("CoreV1Api", "list_node", watch=True) == (("", "nodes", "watch"), False)
    assert grant("BatchV1Api", "delete_namespaced_job") == (("batch", "jobs", "delete"), True)
    assert grant("CoreV1Api", "list_namespaced_resource_quota") == (
        ("", "resourcequotas", "list"),
        True,
    )


def test_the_adapter_calls_something_in_each_scope():
    cluster, namespaced = called_grants()
    assert cluster and namespaced


def test_the_queues_objects_are_read_in_the_probe_namespaces():
    _, namespaced = called_grants()
    groups = {group for group, _, verb in namespaced if verb == "list"}
    assert {"kueue.x-k8s.io", "scheduling.volcano.sh"} <= groups


def test_the_cluster_scoped_queues_are_read_cluster_wide_and_only_they():
    cluster, namespaced = called_grants()
    queues = {
        ("kueue.x-k8s.io", "clusterqueues", "list"),
        ("scheduling.volcano.sh", "queues", "list"),
    }
    assert queues <= cluster
    assert not queues & namespaced
    assert ("kueue.x-k8s.io", "workloads", "list") not in cluster


def test_cluster_role_grants_exactly_the_cluster_wide_calls(objects):
    cluster, _ = called_grants()
    assert granted(one(objects, "ClusterRole")) == cluster


def test_each_probe_namespace_role_grants_exactly_the_namespaced_calls(objects):
    _, namespaced = called_grants()
    roles = {role["metadata"]["namespace"]: granted(role) for role in kinds(objects, "Role")}
    namespaces = config_of(objects)["controller"]["kubernetes"]["namespaces"]
    assert sorted(roles) == sorted(namespaces)
    for namespace, rules in roles.items():
        assert rules == without_service(namespaced), namespace


def test_the_inference_probes_namespace_alone_may_also_run_its_service(with_inference):
    _, namespaced = called_grants()
    roles = {r["metadata"]["namespace"]: granted(r) for r in kinds(with_inference, "Role")}
    assert namespaced - without_service(namespaced) == {
        ("apps", "deployments", "create"),
        ("apps", "deployments", "patch"),
        ("apps", "deployments", "delete"),
        ("", "services", "create"),
        ("", "services", "delete"),
    }
    assert roles.pop("team-a") == namespaced  # the first tenant: the service's namespace
    for namespace, rules in roles.items():
        assert rules == without_service(namespaced), namespace


def test_every_role_is_bound_to_the_controller_alone(objects):
    account = one(objects, "ServiceAccount", "-controller")["metadata"]
    bindings = kinds(objects, "RoleBinding") + kinds(objects, "ClusterRoleBinding")
    assert len(bindings) == len(kinds(objects, "Role")) + 1
    for binding in bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
        ]


def test_the_removed_switches_are_refused(tmp_path: Path):
    """Cluster-wide pod read is not optional (the snapshot lists every namespace's pods), nor
    is reading the queues' objects (a Role may name resources a cluster lacks): their values
    are gone, not silently ignored."""
    for text in ("rbac: {clusterWidePodRead: false}", "rbac: {kueue: always}"):
        values = tmp_path / "values.yaml"
        values.write_text(text + "\n")
        with pytest.raises(AssertionError, match="additional properties"):
            render(tool("helm"), values)
