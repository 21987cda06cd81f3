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
import sys

import kubernetes

from rayquota import environment
from rayquota.kubectl_target import (
    Target,
    add_global_flags,
    dump,
    print_objects,
    target_of,
)
from rayquota.kueuectl_bodies import FlagError
from rayquota.operator.kube import ApiError

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
