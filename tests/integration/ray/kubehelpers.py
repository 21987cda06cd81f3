"""Small kubectl-based helpers for the Ray integration tests."""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from rayquota.localcluster import binaries
from rayquota.localcluster.cluster import ClusterError
from tests.direct_api import ApiUnavailable, api_for, apply_as_kubectl, get_json, kubectl_words
from tests.polling import wait_for

__all__ = ["Kube", "RecordedVersions", "condition", "pod_names", "running", "wait_for"]

T = TypeVar("T")


class ControlPlane(Protocol):
    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> Any: ...


class Kube:
    def __init__(self, control_plane: ControlPlane, namespace: str) -> None:
        self.cp = control_plane
        self.ns = namespace

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> Any:
        return self.cp.kubectl("-n", self.ns, *args, input=input, check=check)

    def apply(self, manifest: dict[str, Any]) -> None:
        """`kubectl apply`: a new object is created directly, as kubectl would create it
        (tests/direct_api.py); an existing one is applied by kubectl (its three-way merge)."""
        apply_as_kubectl(self.cp, self.ns, manifest)

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        """What `kubectl get KIND NAME -o json` prints, or None (missing, or the server down)."""
        return self.get_json(kind, name)

    def list(self, kind: str, selector: str | None = None) -> list[dict[str, Any]]:
        args = [kind] + (["-l", selector] if selector else [])
        listed = self.get_json(*args)
        if listed is None:
            raise ClusterError(f"kubectl get {' '.join(args)} failed: the API server did not list them")
        return list(listed["items"])

    def get_json(self, *args: str) -> dict[str, Any] | None:
        """`kubectl get ARGS -o json` in this namespace, parsed (None where kubectl fails). Polled
        reads go straight to the API server (tests/direct_api.py), not through a kubectl process
        each; kubectl answers what the direct read cannot for certain."""
        return get_json(self.cp, "-n", self.ns, *args)

    def patch(self, kind: str, name: str, patch: dict[str, Any], *, kind_of_patch: str = "merge") -> None:
        self._patch(kind, name, patch, kind_of_patch, "")

    def patch_status(self, kind: str, name: str, patch: dict[str, Any]) -> None:
        self._patch(kind, name, patch, "merge", "status")

    def _patch(self, kind: str, name: str, patch: object, kind_of_patch: str, subresource: str) -> None:
        """`kubectl patch`, sent directly where the name resolves (tests/direct_api.py)."""
        api = api_for(self.cp)
        try:
            resource = api.resource(kind) if api is not None else None
            if api is None or resource is None:
                args = ["patch", kind, name, "--type", kind_of_patch, "-p", json.dumps(patch)]
                self.kubectl(*args, *([f"--subresource={subresource}"] if subresource else []))
                return
            status, answer = api.patch(resource, self.ns, name, patch, kind_of_patch, subresource)
        except ApiUnavailable as exc:
            raise ClusterError(f"kubectl patch {kind} {name} failed (1): {exc}") from exc
        if status != 200:
            words = kubectl_words(answer, status, f"patching {kind} {name}")
            raise ClusterError(f"kubectl patch {kind} {name} failed (1): {words}")  # as kubectl's would

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.list("events") if e["involvedObject"].get("name") == name]

    def events_once(
        self, name: str, told: Callable[[list[dict[str, Any]]], bool], timeout_s: float = 30.0
    ) -> list[dict[str, Any]]:
        """The object's events once ``told(events)`` holds. An event is written after the change it
        tells of (the operator's event writer runs behind its reconciles): a test that saw the
        change waits for the event."""
        seen: list[dict[str, Any]] = []

        def probe() -> bool:
            seen[:] = self.events(name)
            return told(seen)

        try:
            wait_for(f"the events of {name}", probe, timeout_s=timeout_s, interval_s=0.5)
        except AssertionError:
            told_so_far = sorted((e["reason"], e.get("count")) for e in seen)
            raise AssertionError(f"after {timeout_s}s the events of {name} are {told_so_far}") from None
        return seen

    def reasons_once(self, name: str, wanted: set[str], timeout_s: float = 30.0) -> set[str]:
        """The reasons of the object's events once they include all of ``wanted``."""
        events = self.events_once(name, lambda es: wanted <= {e["reason"] for e in es}, timeout_s)
        return {e["reason"] for e in events}

    def pods(self, cluster: str) -> list[dict[str, Any]]:
        pods = self.list("pods", f"ray.io/cluster={cluster}")
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def pod_names(pods: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["name"] for p in pods}


def running(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if p.get("status", {}).get("phase") == "Running"]


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return None


class RecordedVersions:
    """Every version of the objects of one kind in the namespace, as a watch delivers them
    (``kubectl get KIND --watch``): each status write shows up as one version."""

    def __init__(self, kube: Kube, kind: str) -> None:
        kubeconfig = getattr(kube.cp, "kubeconfig", None)
        cmd = [str(binaries.KUBERNETES.path("kubectl")), "-n", kube.ns, "get", kind, "--watch", "-o", "json"]
        if kubeconfig is not None:
            cmd[1:1] = ["--kubeconfig", str(kubeconfig)]
        self._out = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed by close())
        self._proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.DEVNULL, text=True)

    def of(self, name: str) -> list[dict[str, Any]]:
        """The versions of ``name`` seen so far, oldest first."""
        self._out.flush()
        self._out.seek(0)
        text, decoder, versions, at = self._out.read(), json.JSONDecoder(), [], 0
        while True:
            while at < len(text) and text[at].isspace():
                at += 1
            if at >= len(text):
                return versions
            try:
                obj, at = decoder.raw_decode(text, at)
            except json.JSONDecodeError:
                return versions  # the last object is still being written
            if obj.get("metadata", {}).get("name") == name:
                versions.append(obj)

    def close(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)
        self._out.close()

    def __enter__(self) -> RecordedVersions:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
