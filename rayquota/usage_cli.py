"""``rayquota usage`` and ``kubectl rayquota usage``: resource-hours per ClusterQueue, LocalQueue
or namespace over a window, read from the Workloads the API server holds (see
:mod:`rayquota.showback` for the limits) of the queue API group chosen (rayquota.io, or Kueue's
kueue.x-k8s.io in Kueue-API mode), or per ClusterQueue from Prometheus."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import yaml

from rayquota import showback
from rayquota.operator.queue.kueue.api_group import RAYQUOTA, QueueApi

if TYPE_CHECKING:
    from rayquota.operator.kube import KubeClient

OUTPUTS = ("table", "json", "yaml", "csv")


def add_report_flags(parser: argparse.ArgumentParser) -> None:
    """The window, the grouping and the source, as both commands take them."""
    parser.add_argument("--since", default="24h", help="window start: 24h, 7d, or an RFC 3339 time")
    parser.add_argument("--until", default=None, help="window end (default now)")
    parser.add_argument("--by", choices=showback.GROUPINGS, default="clusterqueue")
    parser.add_argument(
        "--prometheus-url",
        default=None,
        help="per ClusterQueue from this Prometheus (it scrapes the operator's /metrics): counts deleted "
        "Workloads too, as far as Prometheus keeps samples",
    )


def add_parser(sub: Any, add_queue_api_flag: Callable[[argparse.ArgumentParser], None]) -> None:
    """``rayquota usage``; ``add_queue_api_flag`` is the CLI's ``--queue-api`` (read commands
    share it)."""
    usage = sub.add_parser("usage", help="showback: GPU-hours (and other resources) per queue or namespace")
    add_report_flags(usage)
    usage.add_argument("-o", "--output", choices=OUTPUTS, default="table")
    usage.add_argument("-n", "--namespace", default=None, help="only this namespace's Workloads")
    add_queue_api_flag(usage)
    usage.set_defaults(func=main)


async def fetch(
    namespace: str | None, api: QueueApi = RAYQUOTA, connect: Callable[[], KubeClient] | None = None
) -> tuple[list[Any], list[Any]]:
    """The Workloads and LocalQueues of ``api``'s group in ``namespace`` (None: every one);
    ``connect`` opens the client (default: in-cluster credentials or $KUBECONFIG)."""
    from rayquota.operator.kube import KubeClient

    client = (connect or KubeClient.from_environment)()
    try:
        workloads, local_queues = await asyncio.gather(
            client.list_items(api.workloads.path(namespace)),
            client.list_items(api.local_queues.path(namespace)),
        )
    finally:
        await client.close()
    return list(workloads), list(local_queues)


async def report(
    args: argparse.Namespace,
    namespace: str | None,
    api: QueueApi = RAYQUOTA,
    connect: Callable[[], KubeClient] | None = None,
) -> dict[str, Any]:
    """The report ``args`` ask for (add_report_flags): from Prometheus with --prometheus-url
    (cluster-wide; ``namespace`` refused), else from the Workloads of ``namespace``."""
    since, until = showback.window(args.since, args.until, time.time())
    if args.prometheus_url:
        return from_prometheus(args.prometheus_url, args.by, namespace, since, until)
    workloads, local_queues = await fetch(namespace, api, connect)
    return showback.usage_report(workloads, local_queues, since, until, args.by)


def render(report: dict[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(report, indent=2)
    if output == "yaml":
        return yaml.safe_dump(report, sort_keys=False).rstrip("\n")
    if output == "csv":
        return showback.report_csv(report).rstrip("\n")
    return showback.report_table(report)


def main(args: argparse.Namespace) -> int:
    from rayquota import environment
    from rayquota.operator.queue.kueue.api_group import chosen

    try:
        api = chosen(args.queue_api, environment.process())
        answer = asyncio.run(report(args, args.namespace, api))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render(answer, args.output))
    return 0


def from_prometheus(
    prometheus_url: str, by: str, namespace: str | None, since: float, until: float
) -> dict[str, Any]:
    from rayquota import showback_prometheus
    from rayquota.dashboard.settings import checked_prometheus_url

    refused = [
        flag
        for flag, given in ((f"--by={by}", by != "clusterqueue"), (f"--namespace={namespace}", namespace))
        if given
    ]
    if refused:
        raise ValueError(f"--prometheus-url counts per ClusterQueue only: not with {' or '.join(refused)}")
    url = checked_prometheus_url(prometheus_url, "--prometheus-url")
    if url is None:
        raise ValueError(f"--prometheus-url={prometheus_url!r}: expected a URL")
    return showback_prometheus.fetch_report(url, since, until)
