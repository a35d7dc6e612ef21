"""Alertmanager's API v2 as an AlertSource: the only module that talks to Alertmanager."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, Self

import httpx

from observer.alerting.base import FiringAlert
from observer.errors import BackendError


class AlertmanagerHttp:
    """GET {url}/api/v2/alerts."""

    def __init__(self, url: str, timeout_seconds: float) -> None:
        self._url = url.rstrip("/") + "/api/v2/alerts"
        self._client = httpx.Client(timeout=timeout_seconds)

    def firing(self) -> list[FiringAlert]:
        params = {"active": "true", "silenced": "true", "inhibited": "true"}
        try:
            response = self._client.get(self._url, params=params)
            response.raise_for_status()
            body = response.json()
        except httpx.HTTPStatusError as exc:
            raise BackendError(
                f"alertmanager {self._url}: HTTP {exc.response.status_code} "
                f"{exc.response.text[:200]}"
            ) from exc
        except httpx.HTTPError as exc:
            raise BackendError(f"alertmanager {self._url}: {exc!r}") from exc
        except ValueError as exc:
            raise BackendError(f"alertmanager {self._url}: not JSON: {exc}") from exc
        if not isinstance(body, list):
            raise BackendError(f"alertmanager {self._url}: expected a list of alerts")
        try:
            return [_alert(item) for item in body]
        except (KeyError, TypeError, ValueError) as exc:
            raise BackendError(f"alertmanager {self._url}: unexpected alert: {exc!r}") from exc

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _alert(item: Mapping[str, Any]) -> FiringAlert:
    labels = {str(k): str(v) for k, v in item["labels"].items()}
    annotations = item.get("annotations") or {}
    ends = item.get("endsAt")
    return FiringAlert(
        fingerprint=str(item["fingerprint"]),
        name=labels.get("alertname", ""),
        severity=labels.get("severity"),
        starts_at=_instant(item["startsAt"]),
        ends_at=_instant(ends) if ends else None,
        labels=labels,
        summary=annotations.get("summary") or annotations.get("description"),
    )


def _instant(text: str) -> datetime:
    at = datetime.fromisoformat(text)
    if at.tzinfo is None:
        raise ValueError(f"time without zone: {text}")
    return at
