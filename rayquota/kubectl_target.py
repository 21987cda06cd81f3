"""What ``kubectl rayquota``'s commands share: kubectl's own flags and the target they name
(namespace, context, kubeconfig, output, the queue API group), a client that asks again on 429,
and the output of objects as json, yaml, names or a table. Both the read views
(``kubectl_plugin``) and kueuectl's verbs (``cli_kueuectl``) build on it."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kubernetes
import yaml

from rayquota.kueuectl_bodies import FlagError
from rayquota.operator.kube import ApiError, KubeClient
from rayquota.operator.queue.kueue.api_group import QUEUE_API_ENV, QueueApi, chosen

OUTPUTS = ("json", "yaml", "wide", "name")
Obj = Mapping[str, Any]
# Answers of 429 (too many requests; a new CRD's storage still initialising) asked again, as kubectl does.
TOO_MANY_REQUESTS, ASKS = 429, 10


class PatientClient(KubeClient):
    """A client that waits out a 429 for as long as the server's Retry-After says (at most 5 s
    a time) and asks again: the server did nothing with the request, so asking again is safe."""

    async def request(self, method: str, path: str, **options: Any) -> Any:
        for ask in range(1, ASKS + 1):
            try:
                return await super().request(method, path, **options)
            except ApiError as exc:
                if exc.status != TOO_MANY_REQUESTS or ask == ASKS:
                    raise
                await asyncio.sleep(min(exc.retry_after_s or 1.0, 5.0))
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class Target:
    """Which cluster, namespace and API group a command acts on, and how it prints."""

    kubeconfig: str | None
    context: str | None
    namespace: str
    all_namespaces: bool
    output: str | None
    api: QueueApi

    @property
    def list_namespace(self) -> str | None:
        """The namespace a list reads; None (every namespace) with -A."""
        return None if self.all_namespaces else self.namespace

    def connect(self) -> KubeClient:
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=self.kubeconfig, context=self.context, client_configuration=configuration
        )
        return PatientClient(configuration)


def add_global_flags(parser: argparse.ArgumentParser, outputs: Sequence[str] = OUTPUTS) -> None:
    """kubectl's flags, accepted before and after the verb (absent ones set nothing, so a
    value given before the verb survives the verb's parser); ``outputs``: what -o takes."""
    parser.add_argument(
        "-n", "--namespace", default=argparse.SUPPRESS, help="the namespace (default: the context's)"
    )
    parser.add_argument(
        "-A", "--all-namespaces", action="store_true", default=argparse.SUPPRESS, help="every namespace"
    )
    parser.add_argument("-o", "--output", default=argparse.SUPPRESS, help=f"one of {', '.join(outputs)}")
    parser.add_argument("--context", default=argparse.SUPPRESS, help="the kubeconfig context to use")
    parser.add_argument(
        "--kubeconfig", default=argparse.SUPPRESS, help="the kubeconfig file (default: $KUBECONFIG)"
    )
    parser.add_argument(
        "--queue-api",
        default=argparse.SUPPRESS,
        help=f"quota objects of rayquota.io (rayquota) or kueue.x-k8s.io (kueue) (default: ${QUEUE_API_ENV})",
    )


def context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the chosen (or current) context; ``default`` when it names none."""
    contexts, current = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    chosen = current
    if context is not None:
        chosen = next((c for c in contexts if c.get("name") == context), None)
        if chosen is None:
            raise FlagError(f"--context {context!r}: no such context in {kubeconfig or '~/.kube/config'}")
    return str(((chosen or {}).get("context") or {}).get("namespace") or "default")


def target_of(args: argparse.Namespace, env: Mapping[str, str]) -> Target:
    output = getattr(args, "output", None)
    outputs: Sequence[str] = getattr(args, "outputs", OUTPUTS)  # a verb may print other formats
    if output is not None and output not in outputs:
        raise FlagError(f"-o/--output {output!r}: expected one of {', '.join(outputs)}")
    try:
        api = chosen(getattr(args, "queue_api", None), env)
    except ValueError as exc:
        raise FlagError(str(exc)) from None
    kubeconfig = getattr(args, "kubeconfig", None) or env.get("KUBECONFIG") or None
    context = getattr(args, "context", None)
    namespace = getattr(args, "namespace", None) or context_namespace(kubeconfig, context)
    return Target(
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        all_namespaces=bool(getattr(args, "all_namespaces", False)),
        output=output,
        api=api,
    )


# --- printing -------------------------------------------------------------------------------


def dump(document: Any, output: str) -> str:
    if output == "json":
        return json.dumps(document, indent=4)
    return yaml.safe_dump(document, sort_keys=False).rstrip("\n")


def as_list(items: Sequence[Obj]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(items)}


def name_of(obj: Obj) -> str:
    """``kind.group/name``, as ``kubectl -o name`` writes it."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    kind = str(obj.get("kind") or "").lower()
    return f"{kind}.{group}/{obj['metadata']['name']}" if group else f"{kind}/{obj['metadata']['name']}"


def print_objects(items: Sequence[Obj], output: str | None, table: str) -> None:
    """A list as the output format asks; the table for none (or wide)."""
    if output in ("json", "yaml"):
        print(dump(as_list(items), output))
    elif output == "name":
        print("\n".join(name_of(o) for o in items))
    else:
        print(table)
