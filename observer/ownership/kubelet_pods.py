"""The kubelet's own view of its pods' phases: GET /pods on its HTTPS port (10250).

The pod-resources API says which pods hold devices, not whether they still run: before
Kubernetes 1.34 (KubeletPodResourcesListUseActivePods, kubernetes#132028) its `List` includes
pods that completed and are not yet deleted (kubernetes#119423, #132020), a Job's pods for as
long as the Job is kept. The agent has no pod informer; the node's kubelet knows each of its
pods' phase and answers /pods to a bearer token allowed `get` on `nodes/pods` (1.33+, KEP-2862;
`nodes/proxy` before), with no load on the API server. The token is read at every call: a
projected ServiceAccount token is rotated on disk."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

from observer.errors import OwnerSourceError

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# A node of hundreds of pods answers a few MB; beyond this something else is answering.
_MAX_BYTES = 64 * 2**20


class KubeletPods:
    def __init__(
        self, url: str, token_file: Path, ca_file: Path | None, timeout_seconds: float
    ) -> None:
        self._url = url
        self._token_file = token_file
        self._timeout_seconds = timeout_seconds
        self._tls = ssl.create_default_context(cafile=ca_file)
        if ca_file is None:
            # A kubelet's self-signed serving certificate (no serverTLSBootstrap) has no CA to
            # check it against: `agent.kubelet_ca_file: null` says so.
            self._tls.check_hostname = False
            self._tls.verify_mode = ssl.CERT_NONE

    def ended(self) -> frozenset[str]:
        """The UIDs of the pods the kubelet says have completed (Succeeded or Failed)."""
        try:
            token = self._token_file.read_text().strip()
            request = urllib.request.Request(
                self._url, headers={"Authorization": f"Bearer {token}"}
            )
            with urllib.request.urlopen(
                request, timeout=self._timeout_seconds, context=self._tls
            ) as answer:
                body = answer.read(_MAX_BYTES + 1)
        except urllib.error.HTTPError as exc:
            exc.close()  # it holds the connection
            raise self._error(f"HTTP {exc.code} {exc.reason}") from exc
        except (OSError, ValueError) as exc:
            raise self._error(str(getattr(exc, "reason", exc))) from exc
        if len(body) > _MAX_BYTES:
            raise self._error(f"an answer over {_MAX_BYTES} bytes")
        try:
            pods = json.loads(body)["items"]
            return frozenset(
                pod["metadata"]["uid"]
                for pod in pods
                if pod.get("status", {}).get("phase") in TERMINAL_PHASES
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise self._error(f"not a PodList: {exc!r}") from exc

    def _error(self, why: str) -> OwnerSourceError:
        return OwnerSourceError(f"the kubelet's pods at {self._url}: {why}")
