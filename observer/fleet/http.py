"""Agents over HTTP: a static list of base URLs and/or every address a DNS name resolves to
(the agents' headless Service in Kubernetes: one A record per agent pod).

Agents are read concurrently, at most `concurrency` at once: read one after another, a few
thousand agents, or a few that time out, would outlast the controller's read cadence. Each
read is bounded, so that a bad agent costs only its own answer: the whole response within
`read_timeout_seconds` (however slowly it trickles in), its body at most `max_snapshot_bytes`
(the read stops there), and a body that is not a snapshot is that agent's error."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence

import httpx

from observer import codec
from observer.domain import NodeSnapshot
from observer.errors import BackendError, SnapshotError


class HttpFleet:
    def __init__(
        self,
        urls: Sequence[str] = (),
        dns_name: str | None = None,
        port: int = 9400,
        read_timeout_seconds: float = 5.0,
        max_snapshot_bytes: int = 4 * 2**20,
        concurrency: int = 32,
    ) -> None:
        self._urls = [u.rstrip("/") for u in urls]
        self._dns_name = dns_name
        self._port = port
        self._deadline = read_timeout_seconds
        self._max_bytes = max_snapshot_bytes
        self._concurrency = concurrency

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
        return asyncio.run(self._fetch_all(agents))

    async def _fetch_all(self, agents: Sequence[str]) -> dict[str, NodeSnapshot | BackendError]:
        # As many connections as reads in flight, so that none waits for the pool. No httpx
        # timeout: those are per operation, and the deadline in _fetch bounds the whole read.
        limits = httpx.Limits(
            max_connections=self._concurrency, max_keepalive_connections=self._concurrency
        )
        gate = asyncio.Semaphore(self._concurrency)
        async with httpx.AsyncClient(timeout=None, limits=limits) as client:
            reads = [self._fetch(client, gate, agent) for agent in agents]
            return dict(zip(agents, await asyncio.gather(*reads), strict=True))

    async def _fetch(
        self, client: httpx.AsyncClient, gate: asyncio.Semaphore, agent: str
    ) -> NodeSnapshot | BackendError:
        async with gate:
            try:
                # Cancelling at the deadline interrupts any wait, even inside the headers.
                async with asyncio.timeout(self._deadline):
                    body = await self._body(client, agent)
                return codec.snapshot_from_bytes(body)
            except TimeoutError:
                reason = (
                    f"no whole answer within {self._deadline:g} s "
                    "(controller.agent_read_timeout_seconds)"
                )
            except (httpx.HTTPError, httpx.InvalidURL, SnapshotError, BackendError) as exc:
                reason = str(exc) or type(exc).__name__
            return BackendError(f"agent {agent}: {reason}")

    async def _body(self, client: httpx.AsyncClient, agent: str) -> bytes:
        async with client.stream("GET", f"{agent}/v1/snapshot") as response:
            if not response.is_success:
                raise BackendError(f"answered HTTP {response.status_code} {response.reason_phrase}")
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self._max_bytes:
                raise self._too_large()
            body = bytearray()
            async for chunk in response.aiter_bytes():  # decoded: a compressed body is capped too
                body += chunk
                if len(body) > self._max_bytes:
                    raise self._too_large()
            return bytes(body)

    def _too_large(self) -> BackendError:
        return BackendError(
            f"snapshot larger than {self._max_bytes} bytes (controller.agent_snapshot_max_bytes)"
        )
