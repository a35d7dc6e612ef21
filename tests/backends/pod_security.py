"""Pod Security admission at the `restricted` level, as the API server's built-in plugin checks
a pod and words its refusal (https://kubernetes.io/docs/concepts/security/pod-security-standards/):
the baseline controls a probe could trip (host namespaces, privileged) and every
restricted one (volume types, privilege escalation, non-root, seccomp, capabilities).

    refusal = restricted_refusal("job-x-abcde", pod_spec)  # None: admitted
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION_LABEL = "pod-security.kubernetes.io/enforce-version"
RESTRICTED = "restricted"
ALLOWED_VOLUME_TYPES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
SECURE_SECCOMP = ("RuntimeDefault", "Localhost")

Spec = dict[str, Any]


def restricted_refusal(pod_name: str, spec: Spec, version: str = "latest") -> str | None:
    """The API server's message refusing pod `pod_name` in a namespace enforcing `restricted`,
    or None when the pod passes."""
    violations = [
        f"{reason} ({detail})"
        for reason, detail in (check(spec) for check in _CHECKS)
        if detail is not None
    ]
    if not violations:
        return None
    return (
        f'pods "{pod_name}" is forbidden: violates PodSecurity "{RESTRICTED}:{version}": '
        + ", ".join(violations)
    )


def _containers(spec: Spec) -> list[dict[str, Any]]:
    kinds = ("initContainers", "containers", "ephemeralContainers")
    return [c for kind in kinds for c in spec.get(kind) or []]


def _context(container: dict[str, Any]) -> dict[str, Any]:
    return container.get("securityContext") or {}


def _named(noun: str, names: Iterable[str]) -> str:
    names = list(names)
    quoted = ", ".join(f'"{name}"' for name in names)
    return f"{noun}{'s' if len(names) > 1 else ''} {quoted}"


def _verb(names: list[str], singular: str, plural: str) -> str:
    return plural if len(names) > 1 else singular


def _privileged(spec: Spec) -> tuple[str, str | None]:
    bad = [c["name"] for c in _containers(spec) if _context(c).get("privileged") is True]
    detail = f"{_named('container', bad)} must not set securityContext.privileged=true"
    return "privileged", detail if bad else None


def _host_namespaces(spec: Spec) -> tuple[str, str | None]:
    bad = [f"{field}=true" for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field)]
    return "host namespaces", ", ".join(bad) or None


def _volume_types(spec: Spec) -> tuple[str, str | None]:
    bad = [
        (volume["name"], kind)
        for volume in spec.get("volumes") or []
        for kind in volume
        if kind != "name" and kind not in ALLOWED_VOLUME_TYPES
    ]
    if not bad:
        return "restricted volume types", None
    names = [name for name, _ in bad]
    kinds = sorted({kind for _, kind in bad})
    uses = _verb(names, "uses", "use")
    detail = f"{_named('volume', names)} {uses} {_named('restricted volume type', kinds)}"
    return "restricted volume types", detail


def _privilege_escalation(spec: Spec) -> tuple[str, str | None]:
    bad = [
        c["name"]
        for c in _containers(spec)
        if _context(c).get("allowPrivilegeEscalation") is not False
    ]
    detail = f"{_named('container', bad)} must set securityContext.allowPrivilegeEscalation=false"
    return "allowPrivilegeEscalation != false", detail if bad else None


def _run_as_non_root(spec: Spec) -> tuple[str, str | None]:
    pod = (spec.get("securityContext") or {}).get("runAsNonRoot")
    containers = _containers(spec)
    if pod is False:
        return "runAsNonRoot != true", "pod must not set securityContext.runAsNonRoot=false"
    explicit_false = [c["name"] for c in containers if _context(c).get("runAsNonRoot") is False]
    if explicit_false:
        detail = (
            f"{_named('container', explicit_false)} must not set securityContext.runAsNonRoot=false"
        )
        return "runAsNonRoot != true", detail
    unset = [c["name"] for c in containers if _context(c).get("runAsNonRoot") is None]
    if pod is True or not unset:
        return "runAsNonRoot != true", None
    detail = f"pod or {_named('container', unset)} must set securityContext.runAsNonRoot=true"
    return "runAsNonRoot != true", detail


def _run_as_user(spec: Spec) -> tuple[str, str | None]:
    problems = []
    if (spec.get("securityContext") or {}).get("runAsUser") == 0:
        problems.append("pod must not set runAsUser=0")
    bad = [c["name"] for c in _containers(spec) if _context(c).get("runAsUser") == 0]
    if bad:
        problems.append(f"{_named('container', bad)} must not set runAsUser=0")
    return "runAsUser=0", "; ".join(problems) or None


def _seccomp(spec: Spec) -> tuple[str, str | None]:
    def kind(context: dict[str, Any]) -> str | None:
        profile: dict[str, Any] = context.get("seccompProfile") or {}
        return profile.get("type")

    pod = kind(spec.get("securityContext") or {})
    if pod is not None and pod not in SECURE_SECCOMP:
        return "seccompProfile", f'pod must not set securityContext.seccompProfile.type to "{pod}"'
    containers = _containers(spec)
    insecure = [
        (c["name"], kind(_context(c)))
        for c in containers
        if kind(_context(c)) not in (None, *SECURE_SECCOMP)
    ]
    if insecure:
        value = insecure[0][1]
        detail = (
            f"{_named('container', [n for n, _ in insecure])} must not set "
            f'securityContext.seccompProfile.type to "{value}"'
        )
        return "seccompProfile", detail
    unset = [c["name"] for c in containers if kind(_context(c)) is None]
    if pod is not None or not unset:
        return "seccompProfile", None
    detail = (
        f"pod or {_named('container', unset)} must set securityContext.seccompProfile.type "
        'to "RuntimeDefault" or "Localhost"'
    )
    return "seccompProfile", detail


def _capabilities(spec: Spec) -> tuple[str, str | None]:
    problems = []
    containers = _containers(spec)
    not_dropped = [
        c["name"]
        for c in containers
        if "ALL" not in ((_context(c).get("capabilities") or {}).get("drop") or [])
    ]
    if not_dropped:
        problems.append(
            f'{_named("container", not_dropped)} must set securityContext.capabilities.drop=["ALL"]'
        )
    for container in containers:
        added = (_context(container).get("capabilities") or {}).get("add") or []
        bad = [cap for cap in added if cap != "NET_BIND_SERVICE"]
        if bad:
            quoted = ", ".join(f'"{cap}"' for cap in bad)
            problems.append(
                f'container "{container["name"]}" must not include {quoted} in '
                "securityContext.capabilities.add"
            )
    return "unrestricted capabilities", "; ".join(problems) or None


# In the order the API server lists them: the baseline level's checks, then the restricted
# level's, each by its check id.
_CHECKS: tuple[Callable[[Spec], tuple[str, str | None]], ...] = (
    _host_namespaces,
    _privileged,
    _privilege_escalation,
    _capabilities,
    _volume_types,
    _run_as_non_root,
    _run_as_user,
    _seccomp,
)
