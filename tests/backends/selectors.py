"""Label and field selectors as the API server applies them to a list or a watch, for the
emulated API server (kmock's emulator matches resource, namespace and name only).

Label selectors, as apimachinery's labels.Parse reads them
(https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors):
requirements joined by commas, all of which must hold: `key=value` (or `==`), `key!=value`,
`key in (a,b)`, `key notin (a,b)`, `key` (exists), `!key` (does not exist), `key>1`, `key<1`.
`!=` and `notin` also match an object without the label. An empty selector selects everything.

Field selectors, as fields.ParseSelector reads them
(https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/):
`field=value` (or `==`), `field!=value`, joined by commas; `\\`, `\\,` and `\\=` escape. A field
the object lacks reads as "" (`spec.nodeName=` selects unscheduled pods). Only the fields each
resource's registry declares selectable are accepted; any other is refused with the API
server's 400 "field label not supported: <field>".

A watch passes on the events of the objects that match; an object that stops matching is not
turned into a DELETED event, as a real watch would.

    class Server(SelectingEmulator): ...
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import kmock

Object = dict[str, Any]
Match = Callable[[Object], bool]

_PREFIX = r"(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?"
_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_KEY = f"{_PREFIX}{_NAME}"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_EXISTS = re.compile(rf"\s*(?P<absent>!)?\s*(?P<key>{_KEY})\s*")
_EQUALITY = re.compile(rf"\s*(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})\s*")
_SET = re.compile(rf"\s*(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*")
_COMPARE = re.compile(rf"\s*(?P<key>{_KEY})\s*(?P<op>[<>])\s*(?P<value>-?[0-9]+)\s*")


def _labels(obj: Object) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def label_selector(text: str) -> Match:
    """What `labelSelector=text` keeps; a selector the API server cannot parse raises its 400."""
    requirements = [_requirement(part) for part in _top_level_commas(text) if part.strip()]
    return lambda obj: all(holds(_labels(obj)) for holds in requirements)


def _requirement(text: str) -> Callable[[dict[str, str]], bool]:
    if m := _SET.fullmatch(text):
        key, values = m["key"], {v.strip() for v in m["values"].split(",")}
        if not all(re.fullmatch(_VALUE, v) for v in values) or values == {""}:
            raise _bad_request(f"unable to parse requirement: {text.strip()}")
        if m["op"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m := _EQUALITY.fullmatch(text):
        key, value = m["key"], m["value"]
        if m["op"] == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if m := _COMPARE.fullmatch(text):
        key, bound, greater = m["key"], int(m["value"]), m["op"] == ">"
        return lambda labels: _compares(labels.get(key), bound, greater)
    if m := _EXISTS.fullmatch(text):
        key, absent = m["key"], bool(m["absent"])
        return lambda labels: (key in labels) != absent
    raise _bad_request(f"unable to parse requirement: {text.strip()}")


def _compares(value: str | None, bound: int, greater: bool) -> bool:
    if value is None or not re.fullmatch(r"-?[0-9]+", value):
        return False
    return int(value) > bound if greater else int(value) < bound


def _top_level_commas(text: str) -> list[str]:
    """The requirements: commas inside `in (...)` separate values, not requirements."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    return [*parts, text[start:]]


def _path(*keys: str) -> Callable[[Object], str]:
    def read(obj: Object) -> str:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, bool):
            return str(value).lower()
        return "" if value is None else str(value)

    return read


_META = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}
# The selectable fields each registry declares (pkg/registry/core/pod/strategy.go
# ToSelectableFields, core/event, core/node, core/secret, batch/job); any other resource, custom
# ones included, selects on metadata.name and metadata.namespace alone.
SELECTABLE: dict[str, dict[str, Callable[[Object], str]]] = {
    "pods": {
        **{f"spec.{f}": _path("spec", f) for f in ("nodeName", "restartPolicy", "schedulerName")},
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": lambda obj: _path("spec", "hostNetwork")(obj) or "false",
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "events": {
        **{
            f"involvedObject.{f}": _path("involvedObject", f)
            for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion")
        },
        "involvedObject.fieldPath": _path("involvedObject", "fieldPath"),
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    },
    "nodes": {"spec.unschedulable": lambda obj: _path("spec", "unschedulable")(obj) or "false"},
    "secrets": {"type": _path("type")},
    "jobs": {"status.successful": _path("status", "succeeded")},
}


def field_selector(plural: str, text: str) -> Match:
    """What `fieldSelector=text` keeps of a list of `plural`."""
    fields = {**_META, **SELECTABLE.get(plural, {})}
    terms: list[tuple[Callable[[Object], str], bool, str]] = []
    for term in re.split(r"(?<!\\),", text):
        if not term:
            continue
        m = re.fullmatch(r"(?P<field>[^=!]+?)\s*(?P<op>==|=|!=)(?P<value>.*)", term)
        if m is None:
            raise _bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        if m["field"] not in fields:
            raise _bad_request(f"field label not supported: {m['field']}")
        value = re.sub(r"\\(.)", r"\1", m["value"])
        terms.append((fields[m["field"]], m["op"] != "!=", value))
    return lambda obj: all((read(obj) == value) == equal for read, equal, value in terms)


def _bad_request(message: str) -> kmock.KubernetesError:
    return kmock.KubernetesError(status=400, reason="BadRequest", message=message)


def selection(request: kmock.Request) -> Match:
    """Both selectors of a list or watch request."""
    plural = (request.resource.plural if request.resource else None) or ""
    labels = label_selector(request.params.get("labelSelector", ""))
    fields = field_selector(plural, request.params.get("fieldSelector", ""))
    return lambda obj: labels(obj) and fields(obj)


class SelectingEmulator(kmock.KubernetesEmulator):
    """kmock's emulator whose lists and watches apply labelSelector and fieldSelector."""

    async def _serve_list(self, request: kmock.Request) -> Any:
        keep = selection(request)
        listing: Any = await super()._serve_list(request)
        return {**listing, "items": [obj for obj in listing["items"] if keep(obj)]}

    async def _serve_watch(self, request: kmock.Request) -> AsyncIterator[Any]:
        keep = selection(request)
        async for event in super()._serve_watch(request):
            if not isinstance(event, dict) or keep(event.get("object") or {}):
                yield event
