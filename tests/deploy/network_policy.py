"""NetworkPolicy ingress as Kubernetes decides it (docs: concepts/services-networking/
network-policies), evaluated over rendered policies for pods described by their labels, their
namespace's labels and their named container ports:

- a pod is isolated for ingress when a policy of its namespace selects it (podSelector) with
  `Ingress` in policyTypes (unset: Ingress); an isolated pod admits the union of the ingress
  rules of every policy that selects it, a pod no policy selects admits everything;
- a rule admits a connection when a peer of `from` matches the source (none listed: every
  source) and one of `ports` matches the port (none listed: every port);
- a peer with podSelector alone selects pods of the policy's namespace, with namespaceSelector
  alone every pod of the namespaces it selects, with both the pods matching podSelector in
  those namespaces; an empty selector selects everything;
- a policy port is a number (up to endPort when set) or the name of a container port of the
  target, with protocol TCP unless it says otherwise.

ipBlock peers (addresses, not pods) are not modelled: a rendered one fails the evaluation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

METADATA_NAME = "kubernetes.io/metadata.name"  # every namespace carries its name as this label


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    labels: dict[str, str]
    ports: dict[str, int] = field(default_factory=dict)  # container port name -> number
    namespace_labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        labels = {METADATA_NAME: self.namespace, **self.namespace_labels}
        object.__setattr__(self, "namespace_labels", labels)


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector's verdict: every matchLabels pair and every matchExpression."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values")
        verdict = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not verdict:
            return False
    return True


def peer_admits(peer: dict[str, Any], policy_namespace: str, source: Pod) -> bool:
    if "ipBlock" in peer:
        raise NotImplementedError(f"an ipBlock peer: {peer}")
    namespaces = peer.get("namespaceSelector")
    if namespaces is None:
        in_namespace = source.namespace == policy_namespace
    else:
        in_namespace = selects(namespaces, source.namespace_labels)
    return in_namespace and selects(peer.get("podSelector", {}), source.labels)


def port_admits(rule_port: dict[str, Any], target: Pod, port: int) -> bool:
    if rule_port.get("protocol", "TCP") != "TCP":
        return False
    number = rule_port.get("port")
    if number is None:
        return True
    if isinstance(number, str):
        return target.ports.get(number) == port
    return number <= port <= rule_port.get("endPort", number)


def reachable(policies: list[dict[str, Any]], source: Pod, target: Pod, port: int) -> bool:
    """Whether `source` may open a TCP connection to `target` on `port`."""
    selecting = [
        p
        for p in policies
        if p["metadata"]["namespace"] == target.namespace
        and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
        and selects(p["spec"]["podSelector"], target.labels)
    ]
    if not selecting:
        return True
    for policy in selecting:
        namespace = policy["metadata"]["namespace"]
        for rule in policy["spec"].get("ingress") or []:
            ports, peers = rule.get("ports") or [], rule.get("from") or []
            port_ok = not ports or any(port_admits(p, target, port) for p in ports)
            peer_ok = not peers or any(peer_admits(peer, namespace, source) for peer in peers)
            if port_ok and peer_ok:
                return True
    return False
