"""Agents over HTTP: a static list of base URLs and/or every address a DNS name resolves to
(the agents' headless Service in Kubernetes: one A record per agent pod)."""

from __future__ import annotations

import socket
from collections.abc import Sequence

import httpx

from observer import codec
from observer.domain import NodeSnapshot
from observer.errors import BackendError


class HttpFleet:
    def __init__(
        self,
        urls: Sequence[str] = (),
        dns_name: str | None = None,
        port: int = 9400,
        timeout_seconds: float = 5.0,
    ) -> None:
        self._urls = [u.rstrip("/") for u in urls]
        self._dns_name = dns_name
        self._port = port
        self._client = httpx.Client(timeout=timeout_seconds)

    def agents(self) -> list[str]:
        found = list(self._urls)
        if self._dns_name:
            try:
                infos = socket.getaddrinfo(self._dns_name, self._port, proto=socket.IPPROTO_TCP)
            except OSError as exc:
                raise BackendError(
                    f"cannot resolve the agents' name {self._dns_name}: {exc}"
                ) from exc
            for address in sorted({str(info[4][0]) for info in infos}):
                host = f"[{address}]" if ":" in address else address
                found.append(f"http://{host}:{self._port}")
        return found

    def fetch(self, agent: str) -> NodeSnapshot:
        try:
            response = self._client.get(f"{agent}/v1/snapshot")
            response.raise_for_status()
            return codec.snapshot_from_json(response.json())
        except httpx.HTTPError as exc:
            raise BackendError(f"agent {agent}: {exc}") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise BackendError(f"agent {agent}: unreadable snapshot: {exc!r}") from exc

    def close(self) -> None:
        self._client.close()
