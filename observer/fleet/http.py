"""Agents over HTTP: a static list of base URLs and/or every address a DNS name resolves to
(the agents' headless Service in Kubernetes: one A record per agent pod).

Agents are read concurrently, at most `concurrency` at once: read one after another, a few
thousand agents, or a few that time out, would outlast the controller's read cadence."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

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
        concurrency: int = 32,
    ) -> None:
        self._urls = [u.rstrip("/") for u in urls]
        self._dns_name = dns_name
        self._port = port
        # As many connections as reads in flight, so that none waits for the pool.
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self._client = httpx.Client(timeout=timeout_seconds, limits=limits)
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="agent-read")

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

    def fetch_all(self, agents: Sequence[str]) -> dict[str, NodeSnapshot | BackendError]:
        return dict(zip(agents, self._pool.map(self._fetch, agents), strict=True))

    def _fetch(self, agent: str) -> NodeSnapshot | BackendError:
        try:
            response = self._client.get(f"{agent}/v1/snapshot")
            response.raise_for_status()
            return codec.snapshot_from_json(response.json())
        except httpx.HTTPError as exc:
            return BackendError(f"agent {agent}: {exc}")
        except (ValueError, KeyError, TypeError) as exc:
            return BackendError(f"agent {agent}: unreadable snapshot: {exc!r}")

    def close(self) -> None:
        self._pool.shutdown()
        self._client.close()
