"""An informer: every object of one kind (all namespaces) kept by one thread, as client-go's
reflector keeps them. A paginated list (`limit`/`continue`), then a watch from the list's
resourceVersion with bookmarks; when a watch ends (the server's timeoutSeconds) a new one from
the last version seen; a new list when the server answers 410 Gone (that version is
compacted away) or a watch fails. Only the fields the backend reads are decoded (wire.py) from
the raw answer of the official client's call.

The thread alone writes the cache. After each change it publishes a new immutable `View`,
swapped whole: the objects in shards, copied on write (a change copies one shard, not the
world), with the view's freshness. Nothing is locked; a reader takes the latest view.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from observer.backends.kubernetes.client import ApiStatusError, api
from observer.backends.kubernetes.wire import Decoder, ObjectMeta, decoded
from observer.clock import Clock
from observer.errors import BackendError

PAGE_ITEMS = 500  # client-go's page size
WATCH_SECONDS = 300  # the server ends a watch after this; client-go picks 5 to 10 minutes
_SHARDS = 256  # a change copies 1/256 of the cache
_RETRY_SECONDS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0)  # between failed lists, then 30 s


class Listed(Protocol):
    @property
    def metadata(self) -> ObjectMeta | None: ...


T = TypeVar("T", bound=Listed)


class Response(Protocol):
    """urllib3's response, as the client returns it with `_preload_content=False`."""

    data: bytes

    def stream(self, amt: int | None = None, decode_content: bool | None = None) -> Iterator[bytes]:
        pass

    def shutdown(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


Call = Callable[..., Any]  # the client's list call of the kind, e.g. list_pod_for_all_namespaces


@dataclass(frozen=True, slots=True)
class View(Generic[T]):
    """What an informer knows at one moment, and since when it is up to date. `up`: the last
    list succeeded and no watch has failed since; while a watch is re-opened after its
    normal end the view stays up. `since`: when `up` last changed."""

    what: str
    shards: tuple[Mapping[str, T], ...] = ()
    up: bool = False
    since: datetime | None = None
    last_event_at: datetime | None = None  # the last event or bookmark
    version: str | None = None  # the resourceVersion reached
    error: str | None = None  # why it is not up
    lists: int = 0  # full lists so far (the first, then one per 410 or failed watch)

    def objects(self) -> Iterator[T]:
        for shard in self.shards:
            yield from shard.values()

    def __len__(self) -> int:
        return sum(map(len, self.shards))

    def blindness(self) -> str:
        """Why the view cannot be read, for BackendError."""
        since = f" since {self.since.isoformat()}" if self.since else ""
        return f"{self.what}: not watched{since}: {self.error or 'not listed yet'}"


class _Gone(Exception):
    """410: the version asked for is older than the server keeps; list again."""


@dataclass
class Informer(Generic[T]):
    """One kind's list and watch on a thread of its own; `view()` is the latest View."""

    what: str  # e.g. "pods in all namespaces"
    list_call: Call
    watch_call: Call  # the list call with watch=True
    decoder: Decoder[T]
    clock: Clock
    timeout_seconds: float
    _view: View[T] = field(init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _synced: threading.Event = field(default_factory=threading.Event, init=False)
    _response: Response | None = field(default=None, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._view = View(self.what)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer {self.what}", daemon=True)
        self._thread.start()

    def view(self) -> View[T]:
        return self._view

    def wait_synced(self, timeout_seconds: float) -> bool:
        """Whether the first list has been published within `timeout_seconds`."""
        return self._synced.wait(timeout_seconds)

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            response.shutdown()  # wakes the thread out of its read
        if self._thread is not None:
            self._thread.join(self.timeout_seconds)

    # --- the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        version: str | None = None
        failures = 0
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._list()
                    failures = 0
                version = self._watch(version)
            except _Gone:
                version = None
            except BackendError as exc:
                if self._stop.is_set():
                    return
                self._down(str(exc))
                version = None
                self._stop.wait(_RETRY_SECONDS[min(failures, len(_RETRY_SECONDS) - 1)])
                failures += 1

    def _list(self) -> str:
        items: dict[str, T] = {}
        token: str | None = None
        while True:
            with api(f"list {self.what}"):
                response = self.list_call(
                    limit=PAGE_ITEMS,
                    _continue=token,
                    _preload_content=False,
                    _request_timeout=self.timeout_seconds,
                )
            page = decoded(self.decoder.page, response.data, f"list {self.what}")
            for item in page.items or ():
                items[_key(item.metadata)] = item
            token = page.metadata.continue_
            if not token:
                break
        shards: list[dict[str, T]] = [{} for _ in range(_SHARDS)]
        for key, item in items.items():
            shards[hash(key) % _SHARDS][key] = item
        version = page.metadata.resource_version
        if not version:
            raise BackendError(f"list {self.what}: the list carries no resourceVersion")
        now = self.clock.now()
        self._view = View(
            self.what, tuple(shards), True, now, now, version, None, self._view.lists + 1
        )
        self._synced.set()
        return version

    def _watch(self, version: str) -> str:
        """Follow one watch from `version` to its end; the last version seen."""
        try:
            with api(f"watch {self.what}"):
                self._response = self.watch_call(
                    resource_version=version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=WATCH_SECONDS,
                    _preload_content=False,
                    _request_timeout=(self.timeout_seconds, WATCH_SECONDS + self.timeout_seconds),
                )
        except ApiStatusError as exc:
            if exc.status == 410:  # some servers refuse the watch itself rather than in-stream
                raise _Gone from None
            raise
        with api(f"watch {self.what}"):
            try:
                for line in _lines(self._response):
                    version = self._apply(line) or version
            finally:
                self._response.release_conn()
                self._response = None
        if self._stop.is_set():
            raise BackendError(f"watch {self.what}: stopped")
        return version

    def _apply(self, line: bytes) -> str | None:
        """One event into the cache; the version it carries."""
        event = decoded(self.decoder.event, line, f"watch {self.what}")
        if event.type == "ERROR":
            status = decoded(self.decoder.status, event.object, f"watch {self.what}")
            if status.code == 410:
                raise _Gone
            raise BackendError(
                f"watch {self.what}: {status.code} {status.reason}: {status.message}"
            )
        now = self.clock.now()
        if event.type == "BOOKMARK":
            meta = decoded(self.decoder.versioned, event.object, f"watch {self.what}").metadata
            self._view = replace(self._view, last_event_at=now, version=meta.resource_version)
            return meta.resource_version
        item = decoded(self.decoder.object, event.object, f"watch {self.what}")
        key = _key(item.metadata)
        index = hash(key) % _SHARDS
        shard = dict(self._view.shards[index])
        if event.type == "DELETED":
            shard.pop(key, None)
        else:
            shard[key] = item
        shards, version = (
            self._view.shards,
            item.metadata.resource_version if item.metadata else None,
        )
        self._view = replace(
            self._view,
            shards=(*shards[:index], shard, *shards[index + 1 :]),
            last_event_at=now,
            version=version or self._view.version,
        )
        return version

    def _down(self, error: str) -> None:
        view = self._view
        since = self.clock.now() if view.up or view.since is None else view.since
        self._view = replace(view, up=False, since=since, error=error)


def _key(meta: ObjectMeta | None) -> str:
    if meta is None or not meta.name:
        raise BackendError("the API returned an object without a name")
    return f"{meta.namespace or ''}/{meta.name}"


def _lines(response: Response) -> Iterator[bytes]:
    """A watch's events, one JSON document a line, however the chunks cut them."""
    rest = b""
    for chunk in response.stream(None, decode_content=False):
        *lines, rest = (rest + chunk).split(b"\n")
        yield from (line for line in lines if line.strip())
    if rest.strip():
        yield rest
