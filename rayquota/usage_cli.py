"""``rayquota usage``: resource-hours per ClusterQueue, LocalQueue or namespace over a window,
read from the Workloads the API server holds (see :mod:`rayquota.showback` for the limits)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from rayquota import showback


def add_parser(sub: Any) -> None:
    usage = sub.add_parser("usage", help="showback: GPU-hours (and other resources) per queue or namespace")
    usage.add_argument("--since", default="24h", help="window start: 24h, 7d, or an RFC 3339 time")
    usage.add_argument("--until", default=None, help="window end (default now)")
    usage.add_argument("--by", choices=showback.GROUPINGS, default="clusterqueue")
    usage.add_argument("-o", "--output", choices=("table", "json", "csv"), default="table")
    usage.add_argument("-n", "--namespace", default=None, help="only this namespace's Workloads")
    usage.add_argument(
        "--prometheus-url",
        default=None,
        help="per ClusterQueue from this Prometheus (it scrapes the operator's /metrics): counts deleted "
        "Workloads too, as far as Prometheus keeps samples",
    )
    usage.set_defaults(func=main)


async def fetch(namespace: str | None) -> tuple[list[Any], list[Any]]:
    from rayquota.operator.core import resources
    from rayquota.operator.kube import KubeClient

    client = KubeClient.from_environment()
    try:
        workloads, local_queues = await asyncio.gather(
            client.list_items(resources.WORKLOADS.path(namespace)),
            client.list_items(resources.LOCAL_QUEUES.path(namespace)),
        )
    finally:
        await client.close()
    return list(workloads), list(local_queues)


def render(report: dict[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(report, indent=2)
    if output == "csv":
        return showback.report_csv(report).rstrip("\n")
    return showback.report_table(report)


def main(args: argparse.Namespace) -> int:
    try:
        since, until = showback.window(args.since, args.until, time.time())
        if args.prometheus_url:
            report = from_prometheus(args, since, until)
        else:
            workloads, local_queues = asyncio.run(fetch(args.namespace))
            report = showback.usage_report(workloads, local_queues, since, until, args.by)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render(report, args.output))
    return 0


def from_prometheus(args: argparse.Namespace, since: float, until: float) -> dict[str, Any]:
    from rayquota import showback_prometheus
    from rayquota.dashboard.settings import checked_prometheus_url

    if args.by != "clusterqueue" or args.namespace:
        raise ValueError(
            f"--prometheus-url counts per ClusterQueue only: not with --by={args.by}"
            + (f" or --namespace={args.namespace}" if args.namespace else "")
        )
    url = checked_prometheus_url(args.prometheus_url, "--prometheus-url")
    if url is None:
        raise ValueError(f"--prometheus-url={args.prometheus_url!r}: expected a URL")
    return showback_prometheus.fetch_report(url, since, until)
