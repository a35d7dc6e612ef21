"""What one of the controller's loops publishes for the others: a value replaced whole by
its one writer and read whole by any thread, never mutated in place, so that no reader waits
for a writer that is busy with I/O."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Published(Generic[T]):
    """The latest value of one writer. Publishing swaps a reference (atomic in CPython); the
    value itself must not be changed after it is published."""

    def __init__(self, value: T) -> None:
        self._value = value

    def publish(self, value: T) -> None:
        self._value = value

    def get(self) -> T:
        return self._value
