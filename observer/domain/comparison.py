"""A figure against its reference as a sentence states it (less, equal, more), chosen from the
two numbers as they are written beside it: the word is never fixed in the sentence. Durations
are compared as the reports write them too (`duration_parts`: the two largest units)."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from enum import StrEnum


class Comparison(StrEnum):
    """Also the suffix of the message key that words it."""

    LESS = "less"
    EQUAL = "equal"
    MORE = "more"


# A duration's units, largest first: (seconds in one, CLDR's unit name).
_UNITS = ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second"))


def written(value: float, places: int = 1) -> Decimal:
    """`value` as the reports write it with `places` decimals: Babel rounds the float's
    shortest decimal form half to even (0.35 is written 0.4, where round() gives 0.3)."""
    return Decimal(str(value)).quantize(Decimal(1).scaleb(-places), ROUND_HALF_EVEN)


def compare(value: float, reference: float, places: int = 1) -> Comparison:
    """`value` against `reference` as both are written: "8.0 of its 8.0" is equal, never
    less, whatever the digits past the written ones."""
    return _relation(written(value, places), written(reference, places))


def compare_shares(value: float, reference: float) -> Comparison:
    """Two fractions as both are written in percent to a tenth: 0.4996 and 0.5 are 50.0%."""
    return _relation(_percent(value), _percent(reference))


def duration_parts(seconds: float) -> tuple[tuple[Decimal, str], ...]:
    """A duration as the reports write it: under a minute in seconds to a tenth; else rounded
    to the second, in the two largest units that are not zero, seconds only under an hour
    ("2 min 5 s", "1 h 1 min", "1 d 5 min")."""
    if seconds < 60:
        return ((written(seconds), "second"),)
    rest = round(seconds)
    parts = []
    for size, unit in _UNITS:
        count, rest = divmod(rest, size)
        if count and not (unit == "second" and seconds >= 3600):
            parts.append((Decimal(count), unit))
    return tuple(parts[:2])


def written_seconds(seconds: float) -> Decimal:
    """The seconds a duration's words say: 3 h 0 min 40 s is written "3 h", 10,800 s."""
    sizes = dict((unit, size) for size, unit in _UNITS)
    return sum((count * sizes[unit] for count, unit in duration_parts(seconds)), Decimal(0))


def compare_seconds(value: float, reference: float) -> Comparison:
    """Two durations as both are written: "lasted 1 h against its bound of 1 h" is equal."""
    return _relation(written_seconds(value), written_seconds(reference))


def _percent(share: float) -> Decimal:
    return Decimal(str(share)).scaleb(2).quantize(Decimal("0.1"), ROUND_HALF_EVEN)


def _relation(mine: Decimal, theirs: Decimal) -> Comparison:
    if mine < theirs:
        return Comparison.LESS
    return Comparison.MORE if mine > theirs else Comparison.EQUAL
