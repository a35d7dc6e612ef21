"""Pod Security admission, as the API server's built-in plugin checks a pod at the level its
namespace enforces (`pod-security.kubernetes.io/enforce`) and words its refusal
(https://kubernetes.io/docs/concepts/security/pod-security-standards/): `baseline` (host
namespaces and ports, privileged, non-default capabilities, hostPath volumes, an Unconfined
seccomp profile), `restricted` (those, with the restricted controls overriding their baseline
forms: volume types, privilege escalation, non-root, seccomp, capabilities), `privileged` (all).

    refusal = pod_security_refusal("restricted", "job-x-abcde", pod_spec)  # None: admitted
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION_LABEL = "pod-security.kubernetes.io/enforce-version"
PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"
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
# What a container runtime grants by default, which baseline lets a pod add back.
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)

Spec = dict[str, Any]


def pod_security_refusal(
    level: str, pod_name: str, spec: Spec, version: str = "latest"
) -> str | None:
    """The API server's message refusing pod `pod_name` in a namespace enforcing `level`, or
    None when the pod passes (always at `privileged`, or with no level)."""
    checks = _LEVELS.get(level, ())
    violations = [
        f"{reason} ({detail})"
        for reason, detail in (check(spec) for check in checks)
        if detail is not None
    ]
    if not violations:
        return None
    return (
        f'pods "{pod_name}" is forbidden: violates PodSecurity "{level}:{version}": '
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


def _baseline_capabilities(spec: Spec) -> tuple[str, str | None]:
    problems = []
    for container in _containers(spec):
        added = (_context(container).get("capabilities") or {}).get("add") or []
        bad = [cap for cap in added if cap not in BASELINE_CAPABILITIES]
        if bad:
            quoted = ", ".join(f'"{cap}"' for cap in bad)
            problems.append(
                f'container "{container["name"]}" must not include {quoted} in '
                "securityContext.capabilities.add"
            )
    return "non-default capabilities", "; ".join(problems) or None


def _host_path_volumes(spec: Spec) -> tuple[str, str | None]:
    names = [v["name"] for v in spec.get("volumes") or [] if "hostPath" in v]
    return "hostPath volumes", _named("volume", names) if names else None


def _host_ports(spec: Spec) -> tuple[str, str | None]:
    bad = [
        (c["name"], port["hostPort"])
        for c in _containers(spec)
        for port in c.get("ports") or []
        if port.get("hostPort")
    ]
    if not bad:
        return "hostPort", None
    names = list(dict.fromkeys(name for name, _ in bad))
    ports = ", ".join(str(port) for _, port in bad)
    noun = "hostPorts" if len(bad) > 1 else "hostPort"
    return "hostPort", f"{_named('container', names)} {_verb(names, 'uses', 'use')} {noun} {ports}"


def _baseline_seccomp(spec: Spec) -> tuple[str, str | None]:
    def unconfined(context: dict[str, Any]) -> bool:
        return (context.get("seccompProfile") or {}).get("type") == "Unconfined"

    if unconfined(spec.get("securityContext") or {}):
        return (
            "seccompProfile",
            'pod must not set securityContext.seccompProfile.type to "Unconfined"',
        )
    bad = [c["name"] for c in _containers(spec) if unconfined(_context(c))]
    field = 'securityContext.seccompProfile.type to "Unconfined"'
    return "seccompProfile", f"{_named('container', bad)} must not set {field}" if bad else None


# In the order the API server lists them (by check id); at restricted, the restricted form of a
# control replaces its baseline form.
_BASELINE: tuple[Callable[[Spec], tuple[str, str | None]], ...] = (
    _baseline_capabilities,
    _host_namespaces,
    _host_path_volumes,
    _host_ports,
    _privileged,
    _baseline_seccomp,
)
_RESTRICTED: tuple[Callable[[Spec], tuple[str, str | None]], ...] = (
    _privilege_escalation,
    _capabilities,
    _host_namespaces,
    _host_ports,
    _privileged,
    _volume_types,
    _run_as_non_root,
    _run_as_user,
    _seccomp,
)
_LEVELS = {BASELINE: _BASELINE, RESTRICTED: _RESTRICTED}
