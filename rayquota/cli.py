"""The `rayquota` command."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rayquota.config.build import Settings
    from rayquota.operator.config import OperatorConfig
    from rayquota.operator.queue.kueue.api_group import QueueApi
    from rayquota.operator.visibility.settings import VisibilitySettings
    from rayquota.operator.webhook_settings import WebhookSettings


def _cluster(args: argparse.Namespace) -> int:
    from rayquota.localcluster import cli as cluster_cli

    return cluster_cli.main(args)


def _peers(args: argparse.Namespace) -> int:
    from rayquota.localcluster import cli as local_cli

    return local_cli.peers_main(args)


def _crds(args: argparse.Namespace) -> int:
    from rayquota.api import crdgen, k8s_openapi

    if args.k8s_openapi is not None:
        from rayquota.localcluster import peers

        if args.k8s_openapi:
            source = Path(args.k8s_openapi)
        else:  # Kubernetes' own module, fetched into go's module cache
            module = peers.downloaded_module(k8s_openapi.SOURCE_MODULE, k8s_openapi.OPENAPI_VERSION)
            source = module / k8s_openapi.SOURCE_DIR
        print(f"wrote {k8s_openapi.regenerate(source)}")
    chart = Path(args.chart) if args.chart else None
    return crdgen.main(out_dir=Path(args.out), check=args.check, chart_dir=chart)


def _simulate(args: argparse.Namespace) -> int:
    from rayquota.simulation import runner

    return runner.main(Path(args.scenario), Path(args.out) if args.out else None)


RUN_FLAGS = (
    ("--queue-api", "queue.api"),
    ("--reconcilers", "kuberay.reconcilersEnabled"),
    ("--dashboard-port", "dashboard.port"),
    ("--wait-for-pods-ready", "waitForPodsReady.enable"),
    ("--pods-ready-block-admission", "waitForPodsReady.blockAdmission"),
    ("--requeuing-timestamp", "waitForPodsReady.requeuingStrategy.timestamp"),
    ("--pods-ready-timeout", "waitForPodsReady.timeout"),
    ("--pods-ready-recovery-timeout", "waitForPodsReady.recoveryTimeout"),
    ("--requeuing-backoff-limit-count", "waitForPodsReady.requeuingStrategy.backoffLimitCount"),
    ("--requeuing-backoff-base-seconds", "waitForPodsReady.requeuingStrategy.backoffBaseSeconds"),
    ("--requeuing-backoff-max-seconds", "waitForPodsReady.requeuingStrategy.backoffMaxSeconds"),
    ("--leader-elect", "leaderElection.leaderElect"),
    ("--lease-namespace", "leaderElection.resourceNamespace"),
    ("--lease-duration", "leaderElection.leaseDuration"),
    ("--lease-renew-period", "leaderElection.renewPeriod"),
    ("--lease-retry-period", "leaderElection.retryPeriod"),
    ("--metrics-port", "metrics.bindAddress"),
    ("--health-port", "health.healthProbeBindAddress"),
)
"""``rayquota run`` flags, each an override of one configuration key (they win over the file and
the environment)."""


def _flag_overrides(args: argparse.Namespace) -> dict[str, tuple[str, Any]]:
    given: dict[str, tuple[str, Any]] = {}
    for flag, key in RUN_FLAGS:
        value = getattr(args, flag.removeprefix("--").replace("-", "_"))
        if value is None:
            continue
        if key.endswith("bindAddress") or key.endswith("healthProbeBindAddress"):
            value = f":{value}" if value > 0 else "0"
        given[key] = (flag, value)
    return given


def _run(args: argparse.Namespace) -> int:
    from rayquota import config as configuration
    from rayquota import environment
    from rayquota.app import main as app_main
    from rayquota.operator.ray.raycronjob.schedule import time_zone

    try:
        env = environment.process()
        loaded = configuration.load(Path(args.config) if args.config else None, env, _flag_overrides(args))
        settings = configuration.settings(loaded, local_time_zone=time_zone(None, env))
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from exc
    if args.print_config:
        print(configuration.render(loaded), end="")
        return 0
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if loaded.configuration.queue.api == "kueue" and (refused := _kueue_refusal()):
        print(f"error: {refused}", file=sys.stderr)
        return 2
    config = dataclasses.replace(
        settings.operator,
        webhooks=_webhooks(args.webhooks, settings.operator),
        visibility=_visibility(loaded.configuration.visibility.enable, settings.operator),
    )
    code = app_main.run(
        config=config,
        namespaces=args.namespace or None,
        metrics_port=settings.metrics_port,
        health_port=settings.health_port,
        verbose=args.verbose,
        bind=settings.bind_address,
        leader_elect=settings.lease is not None,
        lease=settings.lease,
        dashboard=settings.dashboard,
        log_format_name=settings.log_format,
    )
    if code != 0 and settings.lease is not None:
        # Without the lease this process must not linger: a handler thread stuck in I/O would
        # keep a normal interpreter exit waiting on it. Flush the logs and leave at once.
        logging.shutdown()
        os._exit(code)
    return code


def _webhooks(wanted: bool | None, config: OperatorConfig) -> WebhookSettings | None:
    """--no-webhooks: none. Otherwise the configuration's (webhook.*, the chart's) or,
    against a local control plane (or with --webhooks), a loopback server of their own."""
    from rayquota.localcluster.paths import is_local_kubeconfig
    from rayquota.operator.webhook_settings import WebhookSettings

    if wanted is False:
        return None
    if config.webhooks is not None:
        return config.webhooks
    kubeconfig = os.environ.get("KUBECONFIG", "")
    if wanted or (kubeconfig and is_local_kubeconfig(kubeconfig)):
        return WebhookSettings.loopback()
    return None


def _visibility(enable: bool | None, config: OperatorConfig) -> VisibilitySettings | None:
    """The configuration's; or, against a local control plane unless `visibility.enable` is
    false, served on loopback and registered by the operator."""
    from rayquota.localcluster.paths import is_local_kubeconfig
    from rayquota.operator.visibility.settings import VisibilitySettings

    if config.visibility is not None or enable is False:
        return config.visibility
    kubeconfig = os.environ.get("KUBECONFIG", "")
    return VisibilitySettings(0) if kubeconfig and is_local_kubeconfig(kubeconfig) else None


def _kueue_refusal() -> str | None:
    from kubernetes import config

    from rayquota.operator.queue.kueue import kueue_guard

    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))  # type: ignore[no-untyped-call]
    found = kueue_guard.kueue_controller_found(None)
    return kueue_guard.refusal(found) if found else None


def _queues(args: argparse.Namespace) -> int:
    from rayquota import cli_views

    api = _queue_api(args)
    return 2 if api is None else cli_views.main_queues(api, args.output == "wide")


def _workloads(args: argparse.Namespace) -> int:
    from rayquota import cli_views

    api = _queue_api(args)
    return 2 if api is None else cli_views.main_workloads(args.namespace, api, args.output == "wide")


def _explain(args: argparse.Namespace) -> int:
    from rayquota import cli_views

    api = _queue_api(args)
    return 2 if api is None else cli_views.main_explain(args.target, args.namespace, api)


def _queue_api(args: argparse.Namespace) -> QueueApi | None:
    """The group --queue-api (or $RAYQUOTA_QUEUE_API) names; None, said on stderr, if neither mode."""
    from rayquota import environment
    from rayquota.operator.queue.kueue.api_group import chosen

    try:
        return chosen(args.queue_api, environment.process())
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def add_queue_api_flag(parser: argparse.ArgumentParser) -> None:
    """--queue-api of the read commands (queues, workloads, explain, usage)."""
    parser.add_argument(
        "--queue-api",
        choices=("rayquota", "kueue"),
        default=None,
        help="read rayquota.io/v1alpha1 or Kueue's kueue.x-k8s.io/v1beta2 objects, as the operator's "
        "queue.api (default: $RAYQUOTA_QUEUE_API or rayquota)",
    )


def _dashboard(args: argparse.Namespace) -> int:
    from rayquota.dashboard import main as dashboard_main
    from rayquota.dashboard.settings import DashboardSettings, checked_prometheus_url
    from rayquota.operator.queue.kueue.api_group import of_mode

    try:
        settings, configured_prometheus = _dashboard_configuration(args)
        prometheus = checked_prometheus_url(args.prometheus_url, "--prometheus-url") or configured_prometheus
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    api = of_mode(settings.operator.queue.api_mode)
    if args.dashboard_command == "token":
        return dashboard_main.token(
            namespace=args.token_namespace,
            service_account=args.service_account,
            duration_s=args.duration,
            url=args.url,
            api=api,
        )
    return dashboard_main.run(
        namespaces=args.namespace or None,
        settings=DashboardSettings(
            bind=args.bind,
            port=args.port,
            allowed_origins=tuple(args.allowed_origin or ()),
            prometheus_url=prometheus,
        ),
        verbose=args.verbose,
        api=api,
        fair_sharing=settings.operator.queue.fair_sharing,
    )


def _dashboard_configuration(args: argparse.Namespace) -> tuple[Settings, str | None]:
    """The configuration `rayquota run` would read (file, environment overrides), for the dashboard,
    and its dashboard.prometheusUrl (the dashboard section is otherwise the operator's own)."""
    from rayquota import config as configuration
    from rayquota import environment
    from rayquota.config.build import named
    from rayquota.dashboard.settings import checked_prometheus_url

    loaded = configuration.load(Path(args.config) if args.config else None, environment.process())
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    section = loaded.configuration.dashboard
    prometheus = checked_prometheus_url(section.prometheusUrl, named("dashboard.prometheusUrl"))
    return configuration.settings(loaded), prometheus


def _install(args: argparse.Namespace) -> int:
    from rayquota.localcluster import install

    return install.main(samples=args.samples)


def _add_run_command(sub: Any) -> None:
    """`rayquota run`: its flags are overrides of configuration keys (RUN_FLAGS)."""
    run = sub.add_parser("run", help="run the operator against the cluster KUBECONFIG names")
    run.add_argument("--namespace", "-n", action="append", help="watch only these namespaces")
    run.add_argument(
        "--config", help="the configuration file (docs/configuration.md); environment overrides and flags win"
    )
    run.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective configuration, each key with where its value came from, and exit",
    )
    run.add_argument("--metrics-port", type=int, help="default: metrics.bindAddress (:8080)")
    run.add_argument("--health-port", type=int, help="default: health.healthProbeBindAddress (:8081)")
    run.add_argument("--verbose", "-v", action="store_true")
    run.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="reconcile only while holding the coordination.k8s.io Lease (default: on)",
    )
    run.add_argument(
        "--reconcilers",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the Ray reconcilers (default: $RAYQUOTA_RECONCILERS_ENABLED or on); "
        "--no-reconcilers is admission-only mode beside KubeRay's operator",
    )
    run.add_argument(
        "--webhooks",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve the admission webhooks (queued objects born suspended, the gate protected); "
        "default: on against the local control plane (served on 127.0.0.1, registered while the "
        "operator runs), else as the environment says (the Helm chart's)",
    )
    run.add_argument(
        "--lease-namespace",
        help="Lease namespace (default: $RAYQUOTA_LEASE_NAMESPACE, $RAYQUOTA_OPERATOR_NAMESPACE or default)",
    )
    run.add_argument(
        "--queue-api",
        choices=("rayquota", "kueue"),
        help="quota objects to act on: rayquota.io/v1alpha1, or Kueue's kueue.x-k8s.io/v1beta2 on a "
        "cluster with no Kueue controller (default: $RAYQUOTA_QUEUE_API or rayquota)",
    )
    run.add_argument(
        "--dashboard-port",
        type=int,
        help="also serve the read-only dashboard on 127.0.0.1:PORT (default: $RAYQUOTA_DASHBOARD_PORT, off)",
    )
    run.add_argument(
        "--wait-for-pods-ready",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="evict an admitted workload whose pods are not all ready in time, requeue it with "
        "backoff (default: $RAYQUOTA_WAIT_FOR_PODS_READY or off)",
    )
    run.add_argument(
        "--pods-ready-block-admission",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="admit nothing while an admitted workload's pods are not yet all ready",
    )
    run.add_argument("--requeuing-timestamp", choices=("Eviction", "Creation"))
    for flag, key in RUN_FLAGS:
        if flag in (
            "--pods-ready-timeout", "--pods-ready-recovery-timeout", "--requeuing-backoff-limit-count",
            "--requeuing-backoff-base-seconds", "--requeuing-backoff-max-seconds",
            "--lease-duration", "--lease-renew-period", "--lease-retry-period",
        ):  # fmt: skip
            run.add_argument(flag, type=float, help=f"seconds or a count (default: {key})")
    run.set_defaults(func=_run)


def _add_crds_command(sub: Any) -> None:
    """`rayquota crds`: the generated CRDs, and the Kubernetes schemas they embed."""
    crds = sub.add_parser("crds", help="generate crds/*.yaml from the API models")
    crds.add_argument("--out", default="crds", help="output directory (default: crds)")
    crds.add_argument("--check", action="store_true", help="fail if the files on disk differ")
    crds.add_argument(
        "--chart",
        default="helm/rayquota",
        help="the Helm chart whose CRD copies are written (and checked) too; '' for none",
    )
    crds.add_argument(
        "--k8s-openapi",
        nargs="?",
        const="",
        default=None,
        metavar="DIR",
        help="first regenerate rayquota/api/k8s_schemas.json (the Kubernetes schemas the ray.io "
        "CRDs embed) from Kubernetes' OpenAPI v3 documents in DIR (default: api/openapi-spec/v3 "
        "of the k8s.io/kubernetes module, fetched into Go's module cache)",
    )
    crds.set_defaults(func=_crds)


def _add_read_commands(sub: Any) -> None:
    """`rayquota queues`, `workloads` and `explain`: what the queues hold, read once."""
    queues = sub.add_parser("queues", help="ClusterQueues: usage/quota, borrowed, pending, admitted")
    queues.set_defaults(func=_queues)
    workloads = sub.add_parser("workloads", help="Workloads: owner, queue, status, requests, why they wait")
    workloads.add_argument("--namespace", "-n", default=None, help="one namespace (default: all)")
    workloads.set_defaults(func=_workloads)
    for table in (queues, workloads):
        table.add_argument(
            "--output", "-o", choices=("wide",), default=None, help="wide: more columns (docs/operations.md)"
        )
    explain = sub.add_parser("explain", help="why a queued object waits: position, needs, free, who is ahead")
    explain.add_argument("target", help="rayjob/NAME, rayservice/NAME, raycluster/NAME or workload/NAME")
    explain.add_argument("--namespace", "-n", default="default")
    explain.set_defaults(func=_explain)
    for command in (queues, workloads, explain):
        add_queue_api_flag(command)


def _add_peers_command(sub: Any) -> None:
    peers = sub.add_parser("peers", help="build the peers rayquota is measured against (KubeRay, Kueue)")
    psub = peers.add_subparsers(dest="peers_command", required=True)
    peers_build = psub.add_parser("build", help="build (or reuse) a peer and print where its files are")
    peers_build.add_argument("peer", choices=["kuberay", "kueue", "all"])
    peers_build.add_argument(
        "--source",
        metavar="DIR",
        help="kuberay only: build KubeRay's operator from source instead of the pinned v1.6.2 module: DIR "
        "is a KubeRay source tree (its root or ray-operator/, built as it is), or with --tag a git "
        "repository, bare or not; cached with the tree's CRDs in kuberay-operator-<version>/",
    )
    peers_build.add_argument(
        "--tag",
        help="with --source: the tag of the git repository DIR to build (e.g. v1.7.0 or ray-operator/v1.7.0)",
    )
    peers.set_defaults(func=_peers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rayquota", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    cluster = sub.add_parser("cluster", help="the local Kubernetes control plane with fake GPU nodes")
    csub = cluster.add_subparsers(dest="cluster_command", required=True)
    for name, text in (
        ("build", "build (or reuse) the control-plane binaries"),
        ("up", "start the control plane (idempotent)"),
        ("down", "stop every process of the control plane"),
        ("status", "say what runs"),
        ("env", "print the export KUBECONFIG=... line"),
        ("kubeconfig", "print the admin kubeconfig path"),
    ):
        p = csub.add_parser(name, help=text)
        p.add_argument("--name", default="default", help="cluster name (state lives per name)")
        if name == "down":
            p.add_argument("--purge", action="store_true", help="also delete the state directory")
    cluster.set_defaults(func=_cluster)

    from rayquota.localcluster import multicluster_cli

    multicluster_cli.add_parser(sub)

    _add_peers_command(sub)

    _add_crds_command(sub)

    sim = sub.add_parser("simulate", help="run a queueing scenario on a virtual clock")
    sim.add_argument("scenario")
    sim.add_argument("--out", default=None, help="report directory (JSON and PNG)")
    sim.set_defaults(func=_simulate)

    _add_run_command(sub)

    _add_read_commands(sub)

    dashboard = sub.add_parser(
        "dashboard", help="the read-only web dashboard (quotas, queue order, Ray objects)"
    )
    dashboard.add_argument("--port", type=int, default=8090, help="port (default: 8090; 0 picks a free one)")
    dashboard.add_argument("--bind", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    dashboard.add_argument("--namespace", "-n", action="append", help="show only these namespaces (globs)")
    dashboard.add_argument(
        "--allowed-origin",
        action="append",
        help="another origin the pages may be served from (a port-forward or ingress URL)",
    )
    dashboard.add_argument(
        "--prometheus-url",
        help="draw the History page from this Prometheus (it scrapes the operator's /metrics) instead "
        "of the dashboard's own samples (default: the configuration's dashboard.prometheusUrl, "
        "$RAYQUOTA_DASHBOARD_PROMETHEUS_URL)",
    )
    dashboard.add_argument(
        "--config",
        metavar="FILE",
        help="the operator's configuration file (queue.api, fairSharing, dashboard.prometheusUrl), read "
        "with its environment overrides as `rayquota run` reads it",
    )
    dashboard.add_argument("--verbose", "-v", action="store_true")
    dsub = dashboard.add_subparsers(dest="dashboard_command")
    token = dsub.add_parser("token", help="a sign-in token of a read-only viewer ServiceAccount")
    token.add_argument("--namespace", dest="token_namespace", default="default")
    token.add_argument("--service-account", default="rayquota-dashboard-viewer")
    token.add_argument("--duration", type=int, default=8 * 3600, help="seconds (default: 8 hours)")
    token.add_argument("--url", help="print a sign-in link to this dashboard URL instead of the bare token")
    dashboard.set_defaults(func=_dashboard)

    from rayquota import usage_cli

    usage_cli.add_parser(sub, add_queue_api_flag)

    install = sub.add_parser("install", help="install the CRDs (and sample queues) into the cluster")
    install.add_argument("--samples", action="store_true", help="also apply samples/queues")
    install.set_defaults(func=_install)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
