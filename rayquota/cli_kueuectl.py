"""kueuectl's verbs in ``kubectl rayquota``: ``create``, ``list``, ``stop``, ``resume`` and
``delete`` of ClusterQueues, LocalQueues and Workloads, with kueuectl's flags and meaning
(Kueue v0.19.2). The bodies and rows are built in :mod:`rayquota.kueuectl_bodies`."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rayquota import kueuectl_bodies as bodies
from rayquota import kueuectl_flavors as flavors
from rayquota.kueuectl_bodies import FlagError
from rayquota.operator.core.resources import Resource
from rayquota.operator.kube import KubeClient, NotFound

if TYPE_CHECKING:
    from rayquota.kubectl_target import Target

Obj = Mapping[str, Any]
Verb = Callable[["Target", argparse.Namespace], Awaitable[int]]
DRY_RUNS = ("none", "client", "server")
ALIASES = {
    "clusterqueue": ["cq"],
    "localqueue": ["lq"],
    "workload": ["wl", "workloads"],
    "resourceflavor": ["rf"],
}


def _kind_parsers(
    verb: argparse._SubParsersAction[argparse.ArgumentParser], kinds: Sequence[str], what: str
) -> dict[str, argparse.ArgumentParser]:
    from rayquota.kubectl_target import add_global_flags

    parsers = {}
    for kind in kinds:
        parser = verb.add_parser(kind, aliases=ALIASES[kind], help=f"{what} a {kind}")
        add_global_flags(parser)
        parsers[kind] = parser
    return parsers


def _dry_run_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run",
        nargs="?",
        const="client",
        default="none",
        choices=DRY_RUNS,
        help="client: print what would be sent; server: have the server check it without keeping it",
    )


def add_verbs(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``create``, ``list``, ``stop``, ``resume`` and ``delete``, each with its kinds."""
    _add_create(sub)
    _add_list(sub)
    _add_stop_and_resume(sub)
    _add_delete(sub)


def _add_create(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    create = sub.add_parser("create", help="create a ClusterQueue or LocalQueue").add_subparsers(
        dest="kind", required=True
    )
    made = _kind_parsers(create, ["clusterqueue", "localqueue", "resourceflavor"], "create")
    rf = made["resourceflavor"]
    rf.add_argument("name")
    rf.add_argument("--node-labels", help="LABEL=VALUE,... of the flavor's nodes")
    rf.add_argument("--node-taints", help="KEY[=VALUE]:EFFECT,... of the flavor's nodes")
    rf.add_argument("--tolerations", help="[KEY[=VALUE]][:EFFECT],... added to admitted pods")
    rf.set_defaults(run=_create_resource_flavor)
    cq = made["clusterqueue"]
    cq.add_argument("name")
    cq.add_argument("--cohort", help="the cohort the ClusterQueue belongs to")
    cq.add_argument("--queuing-strategy", help="StrictFIFO or BestEffortFIFO (default)")
    cq.add_argument(
        "--namespace-selector", help="KEY=VALUE,... of the namespaces that may submit (default: all)"
    )
    cq.add_argument("--reclaim-within-cohort", help="Never (default), LowerPriority or Any")
    cq.add_argument(
        "--preemption-within-cluster-queue",
        help="Never (default), LowerPriority or LowerOrNewerEqualPriority",
    )
    for flag in bodies.QUOTA_FLAGS:
        cq.add_argument(flag, action="append", default=[], help='"FLAVOR:RESOURCE=QUANTITY;...,FLAVOR2:..."')
    cq.set_defaults(run=_create_cluster_queue)
    lq = made["localqueue"]
    lq.add_argument("name")
    lq.add_argument("-c", "--clusterqueue", default="", help="the ClusterQueue it leads to (required)")
    lq.add_argument(
        "-i",
        "--ignore-unknown-cq",
        action="store_true",
        help="create it even if that ClusterQueue is missing",
    )
    lq.set_defaults(run=_create_local_queue)
    for parser in made.values():
        _dry_run_flag(parser)


def _add_list(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    listing = sub.add_parser("list", help="list ClusterQueues, LocalQueues or Workloads").add_subparsers(
        dest="kind", required=True
    )
    lists = _kind_parsers(listing, ["clusterqueue", "localqueue", "workload", "resourceflavor"], "list")
    lists["resourceflavor"].set_defaults(run=_list_resource_flavors)
    for parser in lists.values():
        parser.add_argument("-l", "--selector", help="label selector")
        parser.add_argument(
            "--field-selector", help="field selector (metadata.name=..., metadata.namespace=...)"
        )
    lists["clusterqueue"].add_argument(
        "--active", choices=("true", "false"), help="only active (or inactive) ones"
    )
    lists["clusterqueue"].set_defaults(run=_list_cluster_queues)
    lists["localqueue"].add_argument("-c", "--clusterqueue", help="only those leading to this ClusterQueue")
    lists["localqueue"].set_defaults(run=_list_local_queues)
    wl = lists["workload"]
    wl.add_argument("-c", "--clusterqueue", help="only those of this ClusterQueue")
    wl.add_argument("-q", "--localqueue", help="only those of this LocalQueue")
    wl.add_argument(
        "--for", dest="owner", help="only the Workload of this job: TYPE[.GROUP]/NAME (rayjob/train)"
    )
    wl.add_argument(
        "--status", action="append", default=[], help="all, pending, quotareserved, admitted, finished"
    )
    wl.set_defaults(run=_list_workloads)


def _add_stop_and_resume(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, keep in (("stop", True), ("resume", False)):
        verb = sub.add_parser(name, help=f"{name} a ClusterQueue, LocalQueue or Workload").add_subparsers(
            dest="kind", required=True
        )
        for kind, parser in _kind_parsers(verb, ["clusterqueue", "localqueue", "workload"], name).items():
            parser.add_argument("name")
            _dry_run_flag(parser)
            if keep and kind != "workload":
                parser.add_argument(
                    "--keep-already-running",
                    action="store_true",
                    help="hold (admit nothing new) but leave admitted workloads running",
                )
            parser.set_defaults(run=_stop if name == "stop" else _resume)


def _add_delete(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    delete = sub.add_parser("delete", help="delete Workloads and the jobs that own them").add_subparsers(
        dest="kind", required=True
    )
    dw = _kind_parsers(delete, ["workload"], "delete")["workload"]
    dw.add_argument("names", nargs="*")
    dw.add_argument("-y", "--yes", action="store_true", help="do not ask before deleting owning jobs")
    dw.add_argument("--all", action="store_true", help="every Workload of the namespace (or of all, with -A)")
    _dry_run_flag(dw)
    dw.set_defaults(run=_delete_workloads)


def _resource(target: Target, kind: str) -> Resource:
    kind = next((k for k, aliases in ALIASES.items() if kind == k or kind in aliases), kind)
    return {
        "clusterqueue": target.api.cluster_queues,
        "localqueue": target.api.local_queues,
        "workload": target.api.workloads,
    }[kind]


def _dry_run_params(args: argparse.Namespace) -> dict[str, str]:
    return {"dryRun": "All"} if args.dry_run == "server" else {}


def _print_result(target: Target, obj: Obj, verb: str, dry_run: str) -> None:
    from rayquota.kubectl_target import dump, name_of

    if target.output in ("json", "yaml"):
        print(dump(obj, target.output))
        return
    suffix = f" ({dry_run} dry run)" if dry_run != "none" else ""
    print(name_of(obj) if target.output == "name" else f"{name_of(obj)} {verb}{suffix}")


async def _with_client(target: Target, work: Callable[[KubeClient], Awaitable[int]]) -> int:
    client = target.connect()
    try:
        return await work(client)
    finally:
        await client.close()


# --- create ---------------------------------------------------------------------------------


async def _create(target: Target, args: argparse.Namespace, resource: Resource, body: Obj) -> int:
    if args.dry_run == "client":
        _print_result(target, body, "created", args.dry_run)
        return 0

    async def work(client: KubeClient) -> int:
        path = resource.path(body["metadata"].get("namespace"))
        created = await client.request("POST", path, body=body, params=_dry_run_params(args))
        _print_result(target, created, "created", args.dry_run)
        return 0

    return await _with_client(target, work)


async def _create_cluster_queue(target: Target, args: argparse.Namespace) -> int:
    flags = bodies.ClusterQueueFlags(
        name=args.name,
        cohort=args.cohort,
        queuing_strategy=args.queuing_strategy,
        namespace_selector=args.namespace_selector,
        reclaim_within_cohort=args.reclaim_within_cohort,
        preemption_within_cluster_queue=args.preemption_within_cluster_queue,
        quotas={flag: getattr(args, flag[2:].replace("-", "_")) for flag in bodies.QUOTA_FLAGS},
    )
    body = bodies.cluster_queue_body(target.api, flags)
    return await _create(target, args, target.api.cluster_queues, body)


async def _create_resource_flavor(target: Target, args: argparse.Namespace) -> int:
    body = flavors.resource_flavor_body(
        target.api, args.name, args.node_labels, args.node_taints, args.tolerations
    )
    return await _create(target, args, target.api.resource_flavors, body)


async def _create_local_queue(target: Target, args: argparse.Namespace) -> int:
    body = bodies.local_queue_body(target.api, args.name, target.namespace, args.clusterqueue)
    if not args.ignore_unknown_cq and args.dry_run != "client":

        async def check(client: KubeClient) -> int:
            return 0 if await client.get(target.api.cluster_queues.path(name=args.clusterqueue)) else 1

        if await _with_client(target, check):
            raise FlagError(
                f"--clusterqueue {args.clusterqueue!r}: no such ClusterQueue "
                "(--ignore-unknown-cq creates the LocalQueue anyway)"
            )
    return await _create(target, args, target.api.local_queues, body)


# --- list -----------------------------------------------------------------------------------


async def _list(target: Target, resource: Resource, args: argparse.Namespace | None) -> list[dict[str, Any]]:
    """The objects (of the namespace, or all with -A), as ``-l`` and ``--field-selector`` select."""
    namespace = target.list_namespace if resource.namespaced else None
    selectors = {"labelSelector": args.selector, "fieldSelector": args.field_selector} if args else {}
    client = target.connect()
    try:
        params = {k: v for k, v in selectors.items() if v}
        result = await client.request("GET", resource.path(namespace), params=params)
        return list(result.get("items") or [])
    finally:
        await client.close()


def _show(target: Target, items: Sequence[Obj], header: list[str], rows: list[list[str]]) -> int:
    from rayquota.cli_tables import table
    from rayquota.kubectl_target import print_objects

    if not items and target.output not in ("json", "yaml"):
        print("No resources found.", file=sys.stderr)
        return 0
    print_objects(items, target.output, table(header, rows))
    return 0


def _with_namespace(
    target: Target, header: list[str], items: Sequence[Obj], rows: list[list[str]]
) -> tuple[list[str], list[list[str]]]:
    if not target.all_namespaces:
        return header, rows
    return ["NAMESPACE", *header], [
        [str(o["metadata"].get("namespace") or ""), *r] for o, r in zip(items, rows, strict=True)
    ]


async def _list_resource_flavors(target: Target, args: argparse.Namespace) -> int:
    items = await _list(target, target.api.resource_flavors, args)
    now = bodies.utc_now()
    rows = [flavors.resource_flavor_row(f, now) for f in items]
    return _show(target, items, flavors.RESOURCE_FLAVOR_HEADER, rows)


async def _list_cluster_queues(target: Target, args: argparse.Namespace) -> int:
    items = await _list(target, target.api.cluster_queues, args)
    if args.active is not None:
        items = [cq for cq in items if bodies.is_active(cq) == (args.active == "true")]
    now, wide = bodies.utc_now(), target.output == "wide"
    header = bodies.CLUSTER_QUEUE_HEADER + (bodies.CLUSTER_QUEUE_WIDE if wide else [])
    return _show(target, items, header, [bodies.cluster_queue_row(cq, now, wide) for cq in items])


async def _list_local_queues(target: Target, args: argparse.Namespace) -> int:
    items = await _list(target, target.api.local_queues, args)
    if args.clusterqueue:
        items = [lq for lq in items if (lq.get("spec") or {}).get("clusterQueue") == args.clusterqueue]
    now, wide = bodies.utc_now(), target.output == "wide"
    header = bodies.LOCAL_QUEUE_HEADER + (bodies.LOCAL_QUEUE_WIDE if wide else [])
    rows = [bodies.local_queue_row(lq, now, wide) for lq in items]
    return _show(target, items, *_with_namespace(target, header, items, rows))


async def _list_workloads(target: Target, args: argparse.Namespace) -> int:
    from rayquota.cli_tables import workload_phase

    phases = bodies.status_filter(args.status)
    if args.owner:
        bodies.owned_by({"metadata": {}}, args.owner)  # a malformed --for is refused before any request
    items = await _list(target, target.api.workloads, args)
    local_queues = {
        (str(lq["metadata"].get("namespace") or ""), str(lq["metadata"]["name"])): lq
        for lq in await _list(target, target.api.local_queues, None)
    }
    kept = [
        wl
        for wl in items
        if (phases is None or workload_phase(wl) in phases)
        and (not args.localqueue or (wl.get("spec") or {}).get("queueName") == args.localqueue)
        and (not args.clusterqueue or bodies.workload_cluster_queue(wl, local_queues) == args.clusterqueue)
        and (not args.owner or bodies.owned_by(wl, args.owner))
    ]
    now = bodies.utc_now()
    rows = [bodies.workload_row(wl, local_queues, now) for wl in kept]
    return _show(target, kept, *_with_namespace(target, bodies.WORKLOAD_HEADER, kept, rows))


# --- stop and resume ------------------------------------------------------------------------


async def _patch(target: Target, args: argparse.Namespace, patch: Obj, verb: str) -> int:
    resource = _resource(target, args.kind)
    path = resource.path(target.namespace if resource.namespaced else None, args.name)

    async def work(client: KubeClient) -> int:
        if args.dry_run == "client":
            current = await client.get(path)
            if current is None:
                raise NotFound("GET", path, 404, f'{resource} "{args.name}" not found')
            _print_result(target, current, verb, args.dry_run)
            return 0
        params = _dry_run_params(args)
        patched = await client.request(
            "PATCH", path, body=dict(patch), params=params, content_type="application/merge-patch+json"
        )
        _print_result(target, patched, verb, args.dry_run)
        return 0

    return await _with_client(target, work)


async def _stop(target: Target, args: argparse.Namespace) -> int:
    if args.kind in ("workload", *ALIASES["workload"]):
        return await _patch(target, args, bodies.active_patch(False), "stopped")
    return await _patch(target, args, bodies.stop_patch(args.keep_already_running), "stopped")


async def _resume(target: Target, args: argparse.Namespace) -> int:
    if args.kind in ("workload", *ALIASES["workload"]):
        return await _patch(target, args, bodies.active_patch(True), "resumed")
    return await _patch(target, args, bodies.resume_patch(), "resumed")


# --- delete workload ------------------------------------------------------------------------


async def _owner_path(client: KubeClient, owner: Obj, namespace: str) -> str:
    """The owner's URL, its plural found by API discovery (as kueuectl's REST mapper does)."""
    api_version = str(owner.get("apiVersion") or "")
    base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    listing = await client.get(base) or {}
    plural = next(
        (
            str(r["name"])
            for r in listing.get("resources") or ()
            if r.get("kind") == owner.get("kind") and "/" not in str(r.get("name"))
        ),
        None,
    )
    if plural is None:
        raise FlagError(f"owner {owner.get('kind')}/{owner.get('name')}: {api_version} serves no such kind")
    return f"{base}/namespaces/{namespace}/{plural}/{owner['name']}"


def confirmed(message: str) -> bool:
    print(message + "Do you want to proceed (y/n)? ", end="", flush=True)
    answer = sys.stdin.readline().strip()
    return answer.lower() == "y"


async def _delete_workloads(target: Target, args: argparse.Namespace) -> int:
    if not args.names and not args.all:
        raise FlagError("delete workload: name one or more Workloads, or --all")
    if args.names and args.all:
        raise FlagError("delete workload: names and --all exclude each other")
    resource = target.api.workloads

    async def work(client: KubeClient) -> int:
        if args.all:
            workloads = await client.list_items(resource.path(target.list_namespace))
        else:
            workloads = []
            for name in args.names:
                found = await client.get(resource.path(target.namespace, name))
                if found is None:
                    print(f'Error from server (NotFound): workloads "{name}" not found', file=sys.stderr)
                else:
                    workloads.append(found)
        owned = [(wl, ref) for wl in workloads for ref in wl["metadata"].get("ownerReferences") or ()]
        if owned and args.dry_run == "none" and not args.yes:
            lines = "".join(
                f"  - {str(ref['kind']).lower()}/{ref['name']} associated with the "
                f"{wl['metadata']['namespace']}/{wl['metadata']['name']} workload\n"
                for wl, ref in owned
            )
            if not confirmed(f"This operation will also delete:\n{lines}"):
                print("Deletion is canceled")
                return 0
        return await _delete_each(client, target, args, workloads)

    return await _with_client(target, work)


async def _delete_each(
    client: KubeClient, target: Target, args: argparse.Namespace, workloads: Sequence[Obj]
) -> int:
    """A Workload with owners goes with them (the owners are deleted, the garbage collector
    takes the Workload); one without is deleted itself."""
    suffix = f" ({args.dry_run} dry run)" if args.dry_run != "none" else ""
    params = _dry_run_params(args)
    for wl in workloads:
        namespace = str(wl["metadata"]["namespace"])
        refs = wl["metadata"].get("ownerReferences") or ()
        paths = [await _owner_path(client, ref, namespace) for ref in refs]
        names = [f"{str(ref['kind']).lower()}/{ref['name']}" for ref in refs]
        if not refs:
            paths = [target.api.workloads.path(namespace, str(wl["metadata"]["name"]))]
            names = [f"workload/{wl['metadata']['name']}"]
        for path, name in zip(paths, names, strict=True):
            if args.dry_run != "client":
                with contextlib.suppress(NotFound):  # gone already
                    await client.request("DELETE", path, body=_delete_options(), params=params)
            print(f"{name} deleted{suffix}")
    return 0


def _delete_options() -> dict[str, Any]:
    return {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
