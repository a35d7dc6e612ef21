"""The base of every settings group (unknown keys are errors, values are frozen) and the error
a rule across fields raises to name each field at fault."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Group(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FieldProblems(ValueError):
    """Problems found by a rule across fields, each at its path below the model that raised it:
    pydantic would report them all at that model, joined on one line."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{path}: {message}" for path, message in problems))
        self.problems = problems
