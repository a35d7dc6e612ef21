"""The typed settings root, from YAML with OBSERVER_<GROUP>__<FIELD> environment overrides; its
groups live in one module each, and the Helm chart's values mirror their names."""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from observer.errors import ConfigError
from observer.settings.agent import AgentSettings
from observer.settings.base import FieldProblems
from observer.settings.controller import ControllerSettings
from observer.settings.detectors import DetectorSettings
from observer.settings.logging_setup import LoggingSettings
from observer.settings.reports import ReportSettings
from observer.settings.storage import StorageSettings

ENV_PREFIX = "OBSERVER_"
ENV_DELIMITER = "__"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter=ENV_DELIMITER, extra="forbid", frozen=True
    )

    agent: AgentSettings = AgentSettings()
    controller: ControllerSettings = ControllerSettings()
    detectors: DetectorSettings = DetectorSettings()
    storage: StorageSettings = StorageSettings()
    logging: LoggingSettings = LoggingSettings()
    reports: ReportSettings = ReportSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file arrives as init values; the environment overrides it.
        return (env_settings, init_settings)


def load_settings(path: Path | None, overrides: dict[str, Any] | None = None) -> Settings:
    """Read `path` (YAML) if given, merge `overrides` (command-line flags) over it, apply
    OBSERVER_* environment overrides, validate. Raises ConfigError with one
    'field.path: problem' line per problem."""
    data = merge(read_yaml(path) if path is not None else {}, overrides or {})
    unknown = unknown_environment(os.environ)
    try:
        settings = Settings(**data)
    except ValidationError as exc:
        raise ConfigError(unknown + problems(exc)) from None
    if unknown:
        raise ConfigError(unknown)
    return settings


def unknown_environment(environ: Mapping[str, str]) -> list[str]:
    """A line for each OBSERVER_<GROUP>__<FIELD> variable whose group does not exist: pydantic
    ignores those (an unknown field of a known group it refuses itself), and a misspelt
    Secret's variable would otherwise be lost without a word."""
    return [
        f"{name}: names no setting ({group} is not a settings group)"
        for name in sorted(environ)
        if name.startswith(ENV_PREFIX)
        and ENV_DELIMITER in name
        and (group := name.removeprefix(ENV_PREFIX).split(ENV_DELIMITER)[0].lower())
        not in Settings.model_fields
    ]


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        if isinstance(value, dict) and isinstance(below, dict):
            merged[key] = merge(below, value)
        else:
            merged[key] = value
    return merged


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a mapping that names a key twice: plain YAML keeps the
    last one, so a second `controller:` block would silently replace the first."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Hashable, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # the base class says what is wrong with such a key
            if key in first_line:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"the key {key!r} again, first at line {first_line[key]}",
                    key_node.start_mark,
                )
            first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def read_yaml(path: Path, holds: str = "setting groups") -> dict[str, Any]:
    """The file's mapping of `holds` (a settings file's groups, a scenario's keys); every way it
    cannot be one is a one-line ConfigError."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError([f"{path}: file not found"]) from None
    except IsADirectoryError:
        raise ConfigError([f"{path}: is a directory, not a YAML file"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot be read ({exc.strerror})"]) from None
    if b"\0" in raw:
        raise ConfigError([f"{path}: a binary file (NUL bytes), not YAML"])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        byte = exc.object[exc.start]
        raise ConfigError(
            [f"{path}: not UTF-8 text (byte {byte:#04x} at offset {exc.start})"]
        ) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "unparsable"
        raise ConfigError([f"{path}: not valid YAML{where}: {problem}"]) from None
    if data is None:
        raise ConfigError([f"{path}: empty, no {holds} in it"])
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: the top level must be a mapping of {holds}"])
    return data


_MESSAGES = {
    "extra_forbidden": "unknown setting",
    "missing": "is required",
}


def problems(exc: ValidationError) -> list[str]:
    """Every problem pydantic found, one 'field.path: problem' line each."""
    return [line for error in exc.errors() for line in _describe(error)]


def _describe(error: Any) -> list[str]:
    """One 'full.field.path: problem' line, or one per field a rule across fields named."""
    where = [str(part) for part in error["loc"]]
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, FieldProblems):
        return [f"{'.'.join([*where, path])}: {message}" for path, message in cause.problems]
    message = _MESSAGES.get(error["type"]) or str(error["msg"])
    message = message.replace("Input should be", "must be").replace("Value error, ", "")
    return [f"{'.'.join(where) or '(root)'}: {message}"]
