"""Lists and watches with versions, as the API server serves them, for the emulated API server
(kmock answers a list whole at no version, and its watch replays every object then follows).

Every write gets the next resourceVersion. A list answers at the current version; with `limit`
it answers a page of one snapshot and a `continue` token for the next. A watch from a version
replays the writes after it, then follows; from no version (or "0") it starts with every
object ADDED. With allowWatchBookmarks it sends a BOOKMARK every `bookmark_seconds` of
quiet; it ends after timeoutSeconds. `compact()` forgets every version so far, as etcd's
compaction does: open watches end, and a watch from an older version is answered with an
ERROR event of 410 Gone (a continue token too), so the client lists again. `refuse(plural)`
breaks that resource's open watches with an error and answers its lists and watches 503 until
`allow()`.

    class Server(VersionedEmulator): ...
"""

from __future__ import annotations

import asyncio
import bisect
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import kmock

from tests.backends.selectors import Match, Object, SelectingEmulator, selection


class _Recorder:
    """Stands for kmock's per-resource buses: each write kmock announces is versioned."""

    def __init__(self, server: VersionedEmulator) -> None:
        self._server = server

    def __getitem__(self, resource: Any) -> _Record:
        return _Record(self._server, resource)


class _Record:
    def __init__(self, server: VersionedEmulator, resource: Any) -> None:
        self._server, self._resource = server, resource

    async def put(self, event: Object) -> None:
        self._server.record(self._resource, event)


class VersionedEmulator(SelectingEmulator):
    def __init__(self) -> None:
        super().__init__()
        self._buses = _Recorder(self)  # type: ignore[assignment]
        self.version = 0
        self.compacted = 0  # versions before it are gone
        self.bookmark_seconds = 0.2
        self.history: list[tuple[int, Any, Object]] = []  # (version, resource, event)
        self.watches: Counter[str] = Counter()  # plural -> watches opened
        self.latest: Counter[str] = Counter()  # plural -> the version of its latest write
        # (plural, namespace, the object's `type`: an event's Warning) -> its latest write
        self.latest_in: Counter[tuple[str, str, str]] = Counter()
        self.refused: set[str] = set()
        self._pages: dict[str, tuple[int, list[Object]]] = {}  # token -> (version, the rest)
        self._wake: asyncio.Event | None = None

    def record(self, resource: Any, event: Object) -> None:
        self.version += 1
        obj = dict(event.get("object") or {})
        obj["metadata"] = {**(obj.get("metadata") or {}), "resourceVersion": str(self.version)}
        self.history.append((self.version, resource, {"type": event["type"], "object": obj}))
        self.latest[resource.plural] = self.version
        namespace, _ = _identity(obj)
        self.latest_in[(resource.plural, namespace, str(obj.get("type") or ""))] = self.version
        self._notify()

    def _notify(self) -> None:
        if self._wake is not None:
            self._wake.set()
        self._wake = asyncio.Event()

    def compact(self) -> None:
        """Call on the server's loop (`call_soon_threadsafe`)."""
        self.compacted = self.version
        self.history.clear()
        self._pages.clear()
        self._notify()

    def refuse(self, plural: str) -> None:
        self.refused.add(plural)
        self._notify()

    def allow(self, plural: str) -> None:
        self.refused.discard(plural)

    def _check_refused(self, request: kmock.Request) -> None:
        plural = request.resource.plural if request.resource else None
        if plural in self.refused:
            raise kmock.KubernetesError(
                status=503, reason="ServiceUnavailable", message=f"{plural}: etcd unavailable"
            )

    async def _serve_list(self, request: kmock.Request) -> Any:
        self._check_refused(request)
        token = request.params.get("continue")
        if token:
            if token not in self._pages:
                raise _gone("The provided continue parameter is too old")
            version, items = self._pages.pop(token)
        else:
            listing: Any = await super()._serve_list(request)
            version, items = self.version, sorted(listing["items"], key=_identity)
        limit = int(request.params.get("limit") or 0) or len(items) or 1
        page, rest = items[:limit], items[limit:]
        meta: Object = {"resourceVersion": str(version)}
        if rest:
            meta["continue"] = next_token = uuid.uuid4().hex
            self._pages[next_token] = (version, rest)
        return {"metadata": meta, "items": page}

    async def _serve_watch(self, request: kmock.Request) -> AsyncIterator[Any]:
        self._check_refused(request)
        plural = (request.resource.plural if request.resource else None) or ""
        self.watches[plural] += 1
        keep = selection(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(request.params.get("timeoutSeconds") or 3600)
        bookmarks = request.params.get("allowWatchBookmarks") == "true"
        yield b""  # the headers: a watch is a stream from here on
        start = request.params.get("resourceVersion") or "0"
        if start == "0":
            version = self.version
            listing: Any = await super()._serve_list(request)
            for obj in listing["items"]:
                yield {"type": "ADDED", "object": obj}
        elif int(start) < self.compacted:
            yield _gone_event(f"too old resource version: {start} ({self.compacted})")
            return
        else:
            version = int(start)
        compacted, bookmark_due = self.compacted, False
        while loop.time() < deadline:
            if plural in self.refused:
                raise RuntimeError(f"watch of {plural} broken")  # kmock streams it as an ERROR
            if self.compacted != compacted:
                return
            pending = self.history[bisect.bisect_right(self.history, version, key=_version) :]
            if pending:
                for event_version, resource, event in pending:
                    version = event_version
                    if _matches(request, resource, event["object"], keep):
                        yield event
                continue
            if bookmark_due and bookmarks:  # nothing pending: the version reached is the last
                version, bookmark_due = self.version, False
                yield {
                    "type": "BOOKMARK",
                    "object": {"metadata": {"resourceVersion": str(version)}},
                }
                continue
            if self._wake is None:
                self._wake = asyncio.Event()
            wake = self._wake
            quiet = min(self.bookmark_seconds, max(0.0, deadline - loop.time()))
            try:
                await asyncio.wait_for(wake.wait(), quiet)
            except TimeoutError:
                bookmark_due = True


def _version(entry: tuple[int, Any, Object]) -> int:
    return entry[0]


def _identity(obj: Object) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def _matches(request: kmock.Request, resource: Any, obj: Object, keep: Match) -> bool:
    namespace, name = _identity(obj)
    return (
        resource == request.resource
        and request.namespace in (None, namespace)
        and request.name in (None, name)
        and keep(obj)
    )


def _gone(message: str) -> kmock.KubernetesError:
    return kmock.KubernetesError(status=410, reason="Expired", message=message)


def _gone_event(message: str) -> Object:
    status = {"kind": "Status", "status": "Failure", "code": 410, "reason": "Expired"}
    return {"type": "ERROR", "object": {**status, "message": message}}
