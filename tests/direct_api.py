"""The tests' kubectl calls, sent to a test control plane's API server without a kubectl process.

The tests poll: `wait_for(lambda: kube.get("rayservice", name) ...)` asks every 0.2 s. With
kubectl each call is a new Go process and a TLS handshake: a clean-clone run started ~2.6 kubectl
processes a second, on a 2-core machine that `make test` keeps CPU-bound. A :class:`DirectApi`
answers what `kubectl get -o json` prints, creates a new object as `kubectl apply` creates it,
and sends `kubectl patch`'s and `kubectl delete --wait=false`'s requests, over one kept-alive
connection pool per API server, retrying as client-go retries.

Names resolve as kubectl resolves them (plural, singular, kind or short name, optionally
``.group``), from the server's discovery: the core group first, otherwise the one group that has
the name. A name two groups share (and no core resource has) is not guessed: the caller falls back
to kubectl, as it does for a name discovery does not know (discovery is read again first, since a
test may have installed a CRD), for flags it does not read, and for an object `kubectl apply`
must merge into.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote, urlencode

import urllib3
import yaml

from rayquota.localcluster.cluster import ClusterError

__all__ = [
    "ApiUnavailable",
    "DirectApi",
    "Resource",
    "api_for",
    "apply_as_kubectl",
    "get_as_kubectl",
    "get_json",
    "kubectl_words",
    "made_namespace",
    "namespace_deleted",
]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# What `kubectl apply` creates with: its field manager, and the server's strict field validation
# (kubectl's default --validate=strict).
APPLY_CREATE_QUERY = "fieldManager=kubectl-client-side-apply&fieldValidation=Strict"

PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
REQUEST_TIMEOUT_S = 30.0
MAX_RETRIES = 10  # client-go's for a 429 or a 5xx with Retry-After
CONNECTION_RETRIES = 2  # a GET on a pooled connection the server closed; a server down fails fast
# A name discovery does not know is looked up again at most this often (a CRD installed since).
REDISCOVER_AFTER_S = 2.0


class ApiUnavailable(Exception):
    """The API server did not answer (down, restarting): what a failed kubectl exits non-zero for."""


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    aliases: tuple[str, ...] = ()  # singular name, short names

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None, name: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace)}"
        base += f"/{self.plural}"
        return base + (f"/{quote(name)}" if name else "")


class DirectApi:
    _by_kubeconfig: ClassVar[dict[str, DirectApi]] = {}
    _made: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        context_name = config.get("current-context")
        context = next(c["context"] for c in config["contexts"] if c["name"] == context_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        self.server = str(cluster["server"]).rstrip("/")
        self.namespace = str(context.get("namespace") or "default")
        tls = ssl.create_default_context(cafile=_file(cluster, "certificate-authority", kubeconfig))
        if user.get("client-certificate") or user.get("client-certificate-data"):
            tls.load_cert_chain(
                _file(user, "client-certificate", kubeconfig), _file(user, "client-key", kubeconfig)
            )
        self._headers = {"Accept": "application/json"}
        if user.get("token"):
            self._headers["Authorization"] = f"Bearer {user['token']}"
        self._pool = urllib3.PoolManager(
            ssl_context=tls, timeout=urllib3.Timeout(total=REQUEST_TIMEOUT_S), retries=False
        )
        self._lock = threading.Lock()
        self._resources: list[Resource] = []
        self._discovered_at = float("-inf")

    @classmethod
    def for_kubeconfig(cls, kubeconfig: Path) -> DirectApi | None:
        """One api per kubeconfig file (so per control plane) in this process; None when the
        kubeconfig is not one this api can use (embedded certificates, exec plugins)."""
        try:
            # Keyed by the file's version too: a cluster brought up again under its name writes
            # new certificates there.
            path = Path(kubeconfig).resolve()
            stat = path.stat()
            key = f"{path}\n{stat.st_mtime_ns}\n{stat.st_size}"
        except OSError:
            return None
        with cls._made:
            if key not in cls._by_kubeconfig:
                try:
                    cls._by_kubeconfig[key] = DirectApi(Path(kubeconfig))
                except (OSError, KeyError, StopIteration, ValueError, ssl.SSLError):
                    return None
            return cls._by_kubeconfig[key]

    # --- reads ------------------------------------------------------------------------------------

    def get(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist. Raises ApiUnavailable."""
        status, body = self._request(resource.path(namespace, name))
        if status == 404:
            return None
        if status != 200:
            raise ApiUnavailable(f"GET {resource.path(namespace, name)} -> {status}: {body[:300]!r}")
        return _as_kubectl_shows(json.loads(body))

    def list(
        self, resource: Resource, namespace: str | None, selector: str | None = None
    ) -> list[dict[str, Any]]:
        """The items as `kubectl get -o json` lists them (each with its apiVersion and kind)."""
        path = resource.path(namespace)
        if selector:
            path += "?" + urlencode({"labelSelector": selector})
        status, body = self._request(path)
        if status != 200:
            raise ApiUnavailable(f"GET {path} -> {status}: {body[:300]!r}")
        items = json.loads(body).get("items") or []
        for item in items:
            item.setdefault("apiVersion", resource.api_version)
            item.setdefault("kind", resource.kind)
        return [_as_kubectl_shows(item) for item in items]

    # --- writes: (status, the server's answer) ------------------------------------------------------

    def create(
        self, resource: Resource, namespace: str | None, body: dict[str, Any], query: str = ""
    ) -> tuple[int, dict[str, Any]]:
        path = resource.path(namespace) + (f"?{query}" if query else "")
        return _answer(*self._request(path, "POST", body))

    def patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        patch: object,
        kind_of_patch: str = "merge",
        subresource: str = "",
    ) -> tuple[int, dict[str, Any]]:
        """As `kubectl patch --type KIND_OF_PATCH [--subresource=...]` sends it."""
        path = resource.path(namespace, name) + (f"/{subresource}" if subresource else "")
        path += "?fieldManager=kubectl-patch"
        return _answer(*self._request(path, "PATCH", patch, PATCH_CONTENT_TYPES[kind_of_patch]))

    def delete(self, resource: Resource, namespace: str | None, name: str) -> tuple[int, dict[str, Any]]:
        """As `kubectl delete --wait=false` sends it (background propagation)."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        return _answer(*self._request(resource.path(namespace, name), "DELETE", body))

    def resource_of_kind(self, api_version: str, kind: str) -> Resource | None:
        """The resource of an object's apiVersion and kind (exact, so never ambiguous)."""
        group, _, version = api_version.rpartition("/")
        for attempt in range(2):
            with self._lock:
                resources = list(self._resources)
            for r in resources:
                if r.kind == kind and r.group == group:
                    return Resource(group, version, r.plural, r.kind, r.namespaced, r.aliases)
            if attempt == 0 and time.monotonic() - self._discovered_at > REDISCOVER_AFTER_S:
                self._discover()
        return None

    # --- names ------------------------------------------------------------------------------------

    def resource(self, name: str) -> Resource | None:
        """What kubectl would read for `name`, or None when that is not certain here."""
        found = self._resolve(name)
        if found is None and time.monotonic() - self._discovered_at > REDISCOVER_AFTER_S:
            self._discover()
            found = self._resolve(name)
        return found

    def _resolve(self, name: str) -> Resource | None:
        word, _, group = name.lower().partition(".")
        with self._lock:
            resources = list(self._resources)
        matches = [
            r
            for r in resources
            if word in (r.plural, r.kind.lower(), *r.aliases)
            and (not group or r.group == group or f"{r.version}.{r.group}" == group)
        ]
        if not matches:
            return None
        core = [r for r in matches if r.group == ""]
        if core:
            return core[0]
        if len({r.group for r in matches}) == 1:
            return matches[0]
        return None  # two groups share the name: kubectl's choice is not guessed

    def _discover(self) -> None:
        resources: list[Resource] = []
        status, body = self._request("/api/v1")
        if status == 200:
            resources += _resources_of("", "v1", json.loads(body))
        status, body = self._request("/apis")
        if status == 200:
            for group in json.loads(body).get("groups") or []:
                version = group["preferredVersion"]["version"]
                status, listed = self._request(f"/apis/{group['name']}/{version}")
                if status == 200:
                    resources += _resources_of(group["name"], version, json.loads(listed))
        with self._lock:
            self._resources = resources
            self._discovered_at = time.monotonic()

    def _request(
        self, path: str, method: str = "GET", body: object = None, content_type: str = "application/json"
    ) -> tuple[int, bytes]:
        """One request, retried as client-go (so kubectl) retries it: a 429, or a 5xx that says
        when to come back (Retry-After), up to MAX_RETRIES times; and a GET whose connection
        failed (a kept-alive connection the server closed), twice."""
        headers = dict(self._headers)
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), content_type
        for attempt in range(MAX_RETRIES + 1):
            try:
                answer = self._pool.request(method, self.server + path, body=data, headers=headers)
            except urllib3.exceptions.HTTPError as exc:
                if method == "GET" and attempt < CONNECTION_RETRIES:
                    time.sleep(0.1)
                    continue
                raise ApiUnavailable(f"{method} {path}: {exc}") from exc
            retry_after = answer.headers.get("Retry-After")
            told_to_wait = answer.status == 429 or (answer.status >= 500 and retry_after is not None)
            if not told_to_wait or attempt == MAX_RETRIES:
                return answer.status, answer.data
            time.sleep(_seconds(retry_after))
        raise AssertionError("unreachable")


def _seconds(retry_after: str | None) -> float:
    try:
        return min(10.0, max(0.1, float(retry_after or 1)))
    except ValueError:
        return 1.0


def _answer(status: int, body: bytes) -> tuple[int, dict[str, Any]]:
    try:
        return status, dict(json.loads(body))
    except ValueError:
        return status, {"message": body.decode(errors="replace")}


def kubectl_words(answer: dict[str, Any], status: int, verb: str) -> str:
    """A refusal as kubectl prints it: 'Error from server (Reason): ...'."""
    reason = answer.get("reason") or status
    return f"Error from server ({reason}): error when {verb}: {answer.get('message') or answer}"


def _as_kubectl_shows(obj: dict[str, Any]) -> dict[str, Any]:
    """kubectl leaves managedFields out unless asked (--show-managed-fields)."""
    (obj.get("metadata") or {}).pop("managedFields", None)
    return obj


def _resources_of(group: str, version: str, listing: dict[str, Any]) -> list[Resource]:
    found = []
    for entry in listing.get("resources") or []:
        if "/" in entry["name"] or "get" not in (entry.get("verbs") or []):
            continue  # a subresource, or nothing to read
        aliases = (
            str(entry.get("singularName") or "").lower(),
            *[str(s).lower() for s in entry.get("shortNames") or []],
        )
        found.append(
            Resource(group, version, entry["name"], entry["kind"], bool(entry.get("namespaced")), aliases)
        )
    return found


def _file(section: dict[str, Any], key: str, kubeconfig: Path) -> str:
    if not section.get(key):
        raise ValueError(f"{kubeconfig}: {key} is not a file (embedded or missing): read it with kubectl")
    path = Path(str(section[key]))
    return str(path if path.is_absolute() else kubeconfig.parent / path)


def api_for(cluster: object) -> DirectApi | None:
    """The direct API of anything with a ``kubeconfig`` path (a LocalCluster), if it can be used."""
    kubeconfig = getattr(cluster, "kubeconfig", None)
    return DirectApi.for_kubeconfig(Path(kubeconfig)) if kubeconfig is not None else None


def get_as_kubectl(cluster: object, args: Sequence[str]) -> tuple[bool, dict[str, Any] | None]:
    """`kubectl get ARGS -o json` answered from the API server directly: (True, what kubectl would
    print, or None where it would exit non-zero), or (False, None) when only kubectl can answer
    for certain (flags this does not read, a name it cannot resolve, a kubeconfig it cannot use).
    `cluster` is anything with a ``kubeconfig`` path (a LocalCluster)."""
    words, namespace, selector = [], None, None
    at = 0
    while at < len(args):
        arg = args[at]
        if arg in ("-n", "--namespace", "-l", "--selector") and at + 1 < len(args):
            if arg in ("-n", "--namespace"):
                namespace = args[at + 1]
            else:
                selector = args[at + 1]
            at += 2
            continue
        if arg.startswith("-") or "/" in arg or "," in arg:
            return False, None
        words.append(arg)
        at += 1
    api = api_for(cluster)
    if api is None or len(words) not in (1, 2) or (len(words) == 2 and selector):
        return False, None
    try:
        resource = api.resource(words[0])
        if resource is None:
            return False, None
        namespace = namespace or api.namespace
        if len(words) == 2:
            return True, api.get(resource, namespace, words[1])
        return True, {"apiVersion": "v1", "kind": "List", "items": api.list(resource, namespace, selector)}
    except ApiUnavailable:
        return True, None


def apply_as_kubectl(cluster: Any, namespace: str | None, manifest: dict[str, Any]) -> None:
    """`kubectl [-n NAMESPACE] apply -f -` of one manifest. An object that does not exist yet is
    created directly, as kubectl creates it (the last-applied annotation kubectl writes, its field
    manager, strict field validation); an existing one, or one the direct path cannot create, is
    applied by kubectl (its three-way merge). A refusal raises ClusterError in kubectl's words.
    `cluster` is anything with a ``kubeconfig`` path and a ``kubectl`` method (a LocalCluster)."""
    if _created_directly(cluster, namespace, manifest):
        return
    scope = ["-n", namespace] if namespace else []
    cluster.kubectl(*scope, "apply", "-f", "-", input=yaml.safe_dump(manifest))


def _created_directly(cluster: object, namespace: str | None, manifest: dict[str, Any]) -> bool:
    """True when the object was created here; False when kubectl must apply it."""
    api = api_for(cluster)
    kind, api_version = manifest.get("kind"), manifest.get("apiVersion")
    if api is None or not isinstance(kind, str) or not isinstance(api_version, str):
        return False
    try:
        resource = api.resource_of_kind(api_version, kind)
        if resource is None:
            return False
        body = json.loads(json.dumps(manifest))
        metadata = body.setdefault("metadata", {})
        if resource.namespaced:
            metadata.setdefault("namespace", namespace or api.namespace)
        annotations = dict(metadata.get("annotations") or {})
        annotations.pop(LAST_APPLIED, None)
        recorded = json.loads(json.dumps(body))
        if annotations:
            recorded["metadata"]["annotations"] = annotations
        else:
            recorded["metadata"].pop("annotations", None)
        annotations[LAST_APPLIED] = json.dumps(recorded, sort_keys=True, separators=(",", ":")) + "\n"
        metadata["annotations"] = annotations
        status, answer = api.create(resource, metadata.get("namespace"), body, APPLY_CREATE_QUERY)
    except ApiUnavailable:
        return False
    if status in (200, 201):
        return True
    if status == 409 and answer.get("reason") == "AlreadyExists":
        return False
    refusal = (
        f'Error from server ({answer.get("reason") or status}): error when creating "STDIN": '
        f"{answer.get('message') or answer}"
    )
    raise ClusterError(f"kubectl apply -f - failed (1): {refusal}")  # as kubectl's would


def get_json(cluster: Any, *args: str) -> dict[str, Any] | None:
    """`kubectl get ARGS -o json`, parsed (None where kubectl fails): read directly where it can
    be, else by kubectl. `cluster` as for :func:`apply_as_kubectl`."""
    handled, value = get_as_kubectl(cluster, args)
    if handled:
        return value
    got = cluster.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(got.stdout) if got.returncode == 0 else None


NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)


def made_namespace(cluster: object, name: str) -> bool:
    """`kubectl create namespace NAME` sent directly: False when it could not be (use kubectl)."""
    api = api_for(cluster)
    if api is None:
        return False
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    try:
        status, answer = api.create(NAMESPACES, None, body, "fieldManager=kubectl-create")
    except ApiUnavailable:
        return False
    if status not in (200, 201):
        raise ApiUnavailable(kubectl_words(answer, status, f"creating namespace {name}"))
    return True


def namespace_deleted(cluster: object, name: str) -> bool:
    """`kubectl delete namespace NAME --wait=false` sent directly: False when it could not be."""
    api = api_for(cluster)
    if api is None:
        return False
    try:
        status, _ = api.delete(NAMESPACES, None, name)
    except ApiUnavailable:
        return False
    return status in (200, 202, 404)
