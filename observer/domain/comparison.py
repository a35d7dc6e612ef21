"""A figure against its reference as a sentence states it (less, equal, more), chosen from the
two numbers as they are written beside it: the word is never fixed in the sentence."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from enum import StrEnum


class Comparison(StrEnum):
    """Also the suffix of the message key that words it."""

    LESS = "less"
    EQUAL = "equal"
    MORE = "more"


def written(value: float, places: int = 1) -> Decimal:
    """`value` as the reports write it with `places` decimals: Babel rounds the float's
    shortest decimal form half to even (0.35 is written 0.4, where round() gives 0.3)."""
    return Decimal(str(value)).quantize(Decimal(1).scaleb(-places), ROUND_HALF_EVEN)


def compare(value: float, reference: float, places: int = 1) -> Comparison:
    """`value` against `reference` as both are written: "8.0 of its 8.0" is equal, never
    less, whatever the digits past the written ones."""
    mine, theirs = written(value, places), written(reference, places)
    if mine < theirs:
        return Comparison.LESS
    return Comparison.MORE if mine > theirs else Comparison.EQUAL
