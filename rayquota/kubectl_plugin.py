"""``kubectl rayquota``: the read views of ``rayquota`` (queues, workloads, explain, usage) and
kueuectl's verbs (create, list, stop, resume, delete), as a kubectl plugin.

kubectl runs ``kubectl-rayquota`` from PATH with every argument after ``rayquota``; the
plugin takes kubectl's own flags itself, anywhere on the line: ``-n/--namespace``,
``-A/--all-namespaces``, ``-o json|yaml|wide|name`` (``usage``: ``table|json|yaml|csv``),
``--context`` and ``--kubeconfig``.
``--queue-api kueue`` (or ``$RAYQUOTA_QUEUE_API=kueue``) acts on kueue.x-k8s.io instead of
rayquota.io.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kubernetes
import yaml

from rayquota.config import environment
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


# --- the read views -------------------------------------------------------------------------


async def _queues(target: Target, args: argparse.Namespace) -> int:
    from rayquota import cli_tables, cli_views

    state = await cli_views.fetch_state(connect=target.connect, api=target.api)
    print_objects(
        state.cluster_queues, target.output, cli_tables.queues_table(state, target.output == "wide")
    )
    return 0


async def _workloads(target: Target, args: argparse.Namespace) -> int:
    from rayquota import cli_tables, cli_views

    state = await cli_views.fetch_state(target.list_namespace, connect=target.connect, api=target.api)
    print_objects(state.workloads, target.output, cli_tables.workloads_table(state, target.output == "wide"))
    return 0


async def _explain(target: Target, args: argparse.Namespace) -> int:
    from rayquota import cli_views

    kind, _, name = str(args.target).partition("/")
    if not name or kind.lower() not in cli_views.KIND_ALIASES:
        kinds = ", ".join(sorted(cli_views.KIND_ALIASES))
        raise FlagError(f"explain {args.target!r}: expected KIND/NAME, KIND one of {kinds}")
    kind = cli_views.KIND_ALIASES[kind.lower()]
    state = await cli_views.fetch_state(connect=target.connect, api=target.api)
    text = cli_views.explain(state, kind, name, target.namespace)
    if target.output in ("json", "yaml"):
        workload = cli_views.find_workload(state, kind, name, target.namespace)
        document = {
            "target": f"{kind}/{name}",
            "namespace": target.namespace,
            "workload": workload,
            "explanation": [line.strip() for line in text.splitlines()],
        }
        print(dump(document, target.output))
    else:
        print(text)
    return 0


async def _usage(target: Target, args: argparse.Namespace) -> int:
    """Showback over the Workloads of the namespace (every one with -A); with --prometheus-url,
    per ClusterQueue over the cluster (an explicit -n is refused)."""
    from rayquota import usage_cli

    namespace = target.list_namespace
    if args.prometheus_url:
        namespace = None if target.all_namespaces else getattr(args, "namespace", None)
    try:
        report = await usage_cli.report(args, namespace, target.api, target.connect)
    except ValueError as exc:
        raise FlagError(str(exc)) from None
    print(usage_cli.render(report, target.output or "table"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from rayquota import cli_kueuectl, usage_cli

    summary = __doc__.split("\n\n")[0].replace("``", "")
    parser = argparse.ArgumentParser(prog="kubectl rayquota", description=summary)
    add_global_flags(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    queues = sub.add_parser("queues", help="ClusterQueues: usage/quota, borrowed, pending, admitted")
    queues.set_defaults(run=_queues)
    workloads = sub.add_parser("workloads", help="Workloads: owner, queue, status, requests, why they wait")
    workloads.set_defaults(run=_workloads)
    explain = sub.add_parser("explain", help="why a queued object waits: position, needs, free, who is ahead")
    explain.add_argument("target", help="rayjob/NAME, rayservice/NAME, raycluster/NAME or workload/NAME")
    explain.set_defaults(run=_explain)
    usage = sub.add_parser("usage", help="showback: GPU-hours (and other resources) per queue or namespace")
    usage_cli.add_report_flags(usage)
    usage.set_defaults(run=_usage, outputs=usage_cli.OUTPUTS)
    for view in (queues, workloads, explain):
        add_global_flags(view)
    add_global_flags(usage, usage_cli.OUTPUTS)
    cli_kueuectl.add_verbs(sub)
    return parser


async def _run(target: Target, args: argparse.Namespace) -> int:
    return int(await args.run(target, args))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        target = target_of(args, environment.process())
        return asyncio.run(_run(target, args))
    except FlagError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except kubernetes.config.ConfigException as exc:
        print(f"error: kubeconfig: {exc}", file=sys.stderr)
        return 1
    except ApiError as exc:
        print(f"Error from server: {exc.message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
