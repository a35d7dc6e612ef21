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
import ssl
from collections.abc import Sequence
from urllib.parse import SplitResult, urlsplit

import h11

from observer.domain import NodeSnapshot
from observer.errors import BackendError, SnapshotError
from observer.fleet import wire

_CHUNK_BYTES = 64 * 1024


class HttpFleet:
    """Each read is one connection, one GET /v1/snapshot, the connection closed: HTTP/1.1
    parsed by h11 over asyncio's streams. A general client (httpx) cost about 1.5 ms of CPU
    per agent here, five times the rest of the read (bench/controller_scale.py --http), and
    at 5,000 agents every 15 s that alone would fill a core."""

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
        self._tls: ssl.SSLContext | None = None  # made once: loading it takes ~0.1 s

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
        gate = asyncio.Semaphore(self._concurrency)
        reads = [self._fetch(gate, agent) for agent in agents]
        return dict(zip(agents, await asyncio.gather(*reads), strict=True))

    async def _fetch(self, gate: asyncio.Semaphore, agent: str) -> NodeSnapshot | BackendError:
        async with gate:
            try:
                # Cancelling at the deadline interrupts any wait, even inside the headers.
                async with asyncio.timeout(self._deadline):
                    body = await self._body(agent)
                return wire.snapshot_from_bytes(body)
            except TimeoutError:
                reason = (
                    f"no whole answer within {self._deadline:g} s "
                    "(controller.agent_read_timeout_seconds)"
                )
            except (OSError, h11.ProtocolError, SnapshotError, BackendError) as exc:
                reason = str(exc) or type(exc).__name__
            return BackendError(f"agent {agent}: {reason}")

    async def _body(self, agent: str) -> bytes:
        url, port = _split(agent)
        reader, writer = await asyncio.open_connection(
            url.hostname, port, ssl=self._context() if url.scheme == "https" else None
        )
        try:
            http = h11.Connection(h11.CLIENT)
            request = h11.Request(
                method="GET",
                target=f"{url.path}/v1/snapshot",
                headers=[("Host", url.netloc), ("Connection", "close")],
            )
            writer.write(http.send(request) + (http.send(h11.EndOfMessage()) or b""))
            await writer.drain()
            return await self._answer(http, reader)
        finally:
            writer.close()

    async def _answer(self, http: h11.Connection, reader: asyncio.StreamReader) -> bytes:
        body = bytearray()
        while True:
            event = http.next_event()
            if event is h11.NEED_DATA:
                http.receive_data(await reader.read(_CHUNK_BYTES))  # b"" at the end: EOF
            elif isinstance(event, h11.Response):
                if not 200 <= event.status_code < 300:
                    reason = event.reason.decode("latin-1")
                    raise BackendError(f"answered HTTP {event.status_code} {reason}")
                declared = dict(event.headers).get(b"content-length", b"")
                if declared.isdigit() and int(declared) > self._max_bytes:
                    raise self._too_large()
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > self._max_bytes:  # the read stops here, however much is sent
                    raise self._too_large()
            elif isinstance(event, h11.EndOfMessage):
                return bytes(body)

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    def _too_large(self) -> BackendError:
        return BackendError(
            f"snapshot larger than {self._max_bytes} bytes (controller.agent_snapshot_max_bytes)"
        )


def _split(agent: str) -> tuple[SplitResult, int]:
    """The agent's URL and port; a URL it cannot read is that agent's error."""
    try:
        url = urlsplit(agent)
    except ValueError as exc:
        raise BackendError(f"not a URL ({exc})") from exc
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        raise BackendError(f"Invalid port: {url.netloc.rpartition(':')[2]!r}") from None
    if url.scheme not in ("http", "https") or not url.hostname:
        raise BackendError("not an http(s) URL")
    return url, port
