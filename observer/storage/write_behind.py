"""Writes a store outage delays but never loses: what one thread could not write is kept,
newest version per key, and written first with its next write."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from observer.errors import StoreError
from observer.logging_setup import get_logger

_log = get_logger("observer.storage")

T = TypeVar("T")


class WriteBehind(Generic[T]):
    """Owned by one thread. `write` must be an upsert: a row written twice is one row, so a
    batch the store took without confirming it is safely written again."""

    def __init__(self, write: Callable[[list[T]], None], key: Callable[[T], Hashable]) -> None:
        self._write = write
        self._key = key
        self._pending: dict[Hashable, T] = {}

    @property
    def pending(self) -> int:
        return len(self._pending)

    def save(self, items: Iterable[T]) -> bool:
        """Write `items` after whatever is still pending; False (and kept) while the store
        cannot take them: the store's outage is its own blind time (Store.outage)."""
        self._pending.update((self._key(item), item) for item in items)
        if not self._pending:
            return True
        try:
            self._write(list(self._pending.values()))
        except StoreError as exc:
            _log.warning("store write deferred", pending=len(self._pending), error=str(exc))
            return False
        self._pending.clear()
        return True
