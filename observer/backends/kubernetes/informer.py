"""An informer: every object of one kind (in one namespace, or all) kept by one thread, as
client-go's reflector keeps them. A paginated list (`limit`/`continue`), then a watch from the
list's resourceVersion with bookmarks; when a watch ends (the server's timeoutSeconds) a new one
from the last version seen; a new list when the server answers 410 Gone (that version is
compacted away) or a watch fails. Only the fields the backend reads are decoded (wire.py) from
the raw answer of the official client's call.

A kind the cluster may lack (`optional`: Kueue's and Volcano's, whose CRDs may not be
installed) answers its list 404: the view is then up and empty, `absent`, and the list is tried
again every ABSENT_RECHECK_SECONDS, so a queue system installed later is picked up.

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
# A kind the cluster lacks (a queue system not installed) is looked for again as often as a
# watch is renewed: one small request per kind every 5 minutes, a Kueue installed later read
# within 5 minutes.
ABSENT_RECHECK_SECONDS = WATCH_SECONDS

T = TypeVar("T")


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
    absent: bool = False  # the cluster has no such kind (its CRD is not installed): empty

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
    optional: bool = False  # a 404 is a kind the cluster lacks, not a failure
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
            except ApiStatusError as exc:
                if not (self.optional and exc.status == 404):
                    self._fail(exc, failures)
                    failures += 1
                else:
                    self._absent()
                    self._stop.wait(ABSENT_RECHECK_SECONDS)
                version = None
            except BackendError as exc:
                self._fail(exc, failures)
                version = None
                failures += 1

    def _fail(self, exc: BackendError, failures: int) -> None:
        if not self._stop.is_set():
            self._down(str(exc))
            self._stop.wait(_RETRY_SECONDS[min(failures, len(_RETRY_SECONDS) - 1)])

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
                items[_identity(item)[0]] = item
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
            # 410: some servers refuse the watch itself rather than in-stream; 404: an optional
            # kind's CRD removed since the list, which the list again will say.
            if exc.status == 410 or (exc.status == 404 and self.optional):
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
        key, version = _identity(item)
        index = hash(key) % _SHARDS
        shard = dict(self._view.shards[index])
        if event.type == "DELETED":
            shard.pop(key, None)
        else:
            shard[key] = item
        shards = self._view.shards
        self._view = replace(
            self._view,
            shards=(*shards[:index], shard, *shards[index + 1 :]),
            last_event_at=now,
            version=version or self._view.version,
        )
        return version

    def _absent(self) -> None:
        """The kind is not served: nothing of it exists, which is known, not blind."""
        view, now = self._view, self.clock.now()
        since = view.since if view.absent and view.since is not None else now
        self._view = View(self.what, (), True, since, now, None, None, view.lists, absent=True)
        self._synced.set()

    def _down(self, error: str) -> None:
        view = self._view
        since = self.clock.now() if view.up or view.since is None else view.since
        self._view = replace(view, up=False, since=since, error=error)


def _identity(item: object) -> tuple[str, str | None]:
    """An object's key in the cache ("<namespace>/<name>") and its resourceVersion, whether
    decoded into wire.py's types or kept as JSON (a custom object's)."""
    if isinstance(item, dict):
        meta = item.get("metadata") or {}
        namespace, name, version = (meta.get(k) for k in ("namespace", "name", "resourceVersion"))
    else:
        found: ObjectMeta | None = getattr(item, "metadata", None)
        namespace, name, version = (
            (found.namespace, found.name, found.resource_version) if found else (None,) * 3
        )
    if not name:
        raise BackendError("the API returned an object without a name")
    return f"{namespace or ''}/{name}", version


def _lines(response: Response) -> Iterator[bytes]:
    """A watch's events, one JSON document a line, however the chunks cut them."""
    rest = b""
    for chunk in response.stream(None, decode_content=False):
        *lines, rest = (rest + chunk).split(b"\n")
        yield from (line for line in lines if line.strip())
    if rest.strip():
        yield rest
