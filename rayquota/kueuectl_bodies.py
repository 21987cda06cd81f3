"""What the kueuectl verbs of ``kubectl rayquota`` send and show: quota flags parsed into
resource groups, ClusterQueue and LocalQueue bodies, the stop/resume patches and the rows of
``list``. Pure functions on dicts; the commands that talk to the API server are in
:mod:`rayquota.cli_kueuectl`.

The flags and their meaning follow kueuectl (Kueue v0.19.2): ``--nominal-quota
"FLAVOR:RES=QTY;RES=QTY,FLAVOR2:..."``, likewise ``--borrowing-limit`` and ``--lending-limit``;
entries of one flavor merge across the three flags (they must name the same resources), and
flavors that cover the same resources share a resource group.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rayquota.cli_tables import workload_phase
from rayquota.operator.queue.kueue.api_group import KUEUE_MODE, QueueApi
from rayquota.queueing.policies import (
    QueueingStrategy,
    ReclaimWithinCohortPolicy,
    StopPolicy,
    WithinClusterQueuePolicy,
)
from rayquota.queueing.quantities import QuantityError, parse_quantity

Obj = Mapping[str, Any]

# Which field of a ResourceQuota each quota flag sets.
QUOTA_FLAGS = {
    "--nominal-quota": "nominalQuota",
    "--borrowing-limit": "borrowingLimit",
    "--lending-limit": "lendingLimit",
}
_FLAVOR_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")


class FlagError(ValueError):
    """A flag value that cannot be turned into what it asks for; the message names both."""


@dataclass
class FlavorEntry:
    """One flavor's quotas as the flags give them: resource name -> {field: quantity}."""

    flavor: str
    quotas: dict[str, dict[str, str]] = field(default_factory=dict)


def parse_flavor_quotas(flag: str, value: str) -> list[FlavorEntry]:
    """``"alpha:cpu=9;memory=36Gi,beta:cpu=18"`` of one quota flag, entry by entry."""
    entries = []
    for spec in (s.strip() for s in value.split(",")):
        if not spec:
            continue
        flavor, sep, resources = (part.strip() for part in spec.partition(":"))
        if not sep or not _FLAVOR_NAME.match(flavor):
            raise FlagError(f"{flag} {spec!r}: expected FLAVOR:RESOURCE=QUANTITY;... with a flavor name")
        entry = FlavorEntry(flavor)
        for item in (r.strip() for r in resources.split(";")):
            if not item:
                continue
            name, eq, quantity = (part.strip() for part in item.partition("="))
            if not eq or not name or not quantity:
                raise FlagError(f"{flag} {spec!r}: {item!r} is not RESOURCE=QUANTITY")
            if name in entry.quotas:
                raise FlagError(f"{flag} {spec!r}: resource {name!r} named twice")
            try:
                parse_quantity(quantity)
            except QuantityError as exc:
                raise FlagError(f"{flag} {spec!r}: {exc}") from exc
            entry.quotas[name] = {QUOTA_FLAGS[flag]: quantity}
        if not entry.quotas:
            raise FlagError(f"{flag} {spec!r}: no RESOURCE=QUANTITY after the flavor")
        entries.append(entry)
    return entries


def _merge_by_flavor(entries: Sequence[tuple[str, FlavorEntry]]) -> list[FlavorEntry]:
    merged: dict[str, FlavorEntry] = {}
    for flag, entry in entries:
        known = merged.get(entry.flavor)
        if known is None:
            merged[entry.flavor] = FlavorEntry(entry.flavor, {r: dict(q) for r, q in entry.quotas.items()})
            continue
        if set(known.quotas) != set(entry.quotas):
            raise FlagError(
                f"{flag}: flavor {entry.flavor!r} lists {sorted(entry.quotas)}, elsewhere "
                f"{sorted(known.quotas)}; every flag must name the same resources of a flavor"
            )
        for resource, quota in entry.quotas.items():
            for key, quantity in quota.items():
                if key in known.quotas[resource]:
                    raise FlagError(f"{flag}: flavor {entry.flavor!r} sets {resource} {key} twice")
                known.quotas[resource][key] = quantity
    return list(merged.values())


def resource_groups(flags: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """The ClusterQueue's ``resourceGroups`` from the quota flags (flag -> its values)."""
    entries = [
        (flag, entry)
        for flag in QUOTA_FLAGS
        for value in flags.get(flag) or ()
        for entry in parse_flavor_quotas(flag, value)
    ]
    groups: list[dict[str, Any]] = []
    by_resources: dict[frozenset[str], dict[str, Any]] = {}
    for flavor in _merge_by_flavor(entries):
        covered = frozenset(flavor.quotas)
        group = by_resources.get(covered)
        if group is None:
            clash = next((other for other in by_resources if other & covered), None)
            if clash is not None:
                raise FlagError(
                    f"flavor {flavor.flavor!r} covers {sorted(covered)}, which overlaps another "
                    f"flavor's {sorted(clash)}: flavors of one resource group cover the same resources"
                )
            group = {"coveredResources": list(flavor.quotas), "flavors": []}
            by_resources[covered] = group
            groups.append(group)
        order = group["coveredResources"]
        group["flavors"].append(
            {
                "name": flavor.flavor,
                "resources": [{"name": r, "nominalQuota": "0", **flavor.quotas[r]} for r in order],
            }
        )
    return groups


def _choice(flag: str, value: str | None, allowed: Sequence[str], default: str) -> str:
    if value is None:
        return default
    if value not in allowed:
        raise FlagError(f"{flag} {value!r}: expected one of {', '.join(allowed)}")
    return value


def namespace_selector(value: str | None) -> dict[str, Any]:
    """``--namespace-selector k=v,k2=v2`` as a label selector; without it, every namespace
    (kueuectl's empty selector)."""
    if not value:
        return {}
    labels = {}
    for pair in value.split(","):
        key, eq, val = (p.strip() for p in pair.partition("="))
        if not eq or not key:
            raise FlagError(f"--namespace-selector {value!r}: {pair!r} is not KEY=VALUE")
        labels[key] = val
    return {"matchLabels": labels}


@dataclass
class ClusterQueueFlags:
    name: str
    cohort: str | None = None
    queuing_strategy: str | None = None
    namespace_selector: str | None = None
    reclaim_within_cohort: str | None = None
    preemption_within_cluster_queue: str | None = None
    quotas: dict[str, list[str]] = field(default_factory=dict)


def cluster_queue_body(api: QueueApi, flags: ClusterQueueFlags) -> dict[str, Any]:
    """The ClusterQueue ``kubectl rayquota create clusterqueue`` creates, in the API group of ``api``."""
    groups = resource_groups(flags.quotas)
    limited = [f for f in ("--borrowing-limit", "--lending-limit") if flags.quotas.get(f)]
    if limited and not flags.cohort:
        raise FlagError(f"{limited[0]} needs --cohort: only a ClusterQueue in a cohort borrows or lends")
    spec: dict[str, Any] = {
        "queueingStrategy": _choice(
            "--queuing-strategy",
            flags.queuing_strategy,
            [s.value for s in QueueingStrategy],
            QueueingStrategy.BEST_EFFORT_FIFO.value,
        ),
        "namespaceSelector": namespace_selector(flags.namespace_selector),
        "preemption": {
            "reclaimWithinCohort": _choice(
                "--reclaim-within-cohort",
                flags.reclaim_within_cohort,
                [p.value for p in ReclaimWithinCohortPolicy],
                ReclaimWithinCohortPolicy.NEVER.value,
            ),
            "withinClusterQueue": _choice(
                "--preemption-within-cluster-queue",
                flags.preemption_within_cluster_queue,
                [p.value for p in WithinClusterQueuePolicy],
                WithinClusterQueuePolicy.NEVER.value,
            ),
        },
        "resourceGroups": groups,
    }
    if flags.cohort:
        spec["cohortName" if api.mode == KUEUE_MODE else "cohort"] = flags.cohort
    resource = api.cluster_queues
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": flags.name},
        "spec": spec,
    }


def local_queue_body(api: QueueApi, name: str, namespace: str, cluster_queue: str) -> dict[str, Any]:
    if not cluster_queue:
        raise FlagError("--clusterqueue/-c: the ClusterQueue the LocalQueue leads to is required")
    resource = api.local_queues
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def stop_patch(keep_already_running: bool) -> dict[str, Any]:
    """A queue on hold: nothing new admitted; without ``--keep-already-running`` its admitted
    workloads are evicted too."""
    policy = StopPolicy.HOLD if keep_already_running else StopPolicy.HOLD_AND_DRAIN
    return {"spec": {"stopPolicy": policy.value}}


def resume_patch() -> dict[str, Any]:
    return {"spec": {"stopPolicy": StopPolicy.NONE.value}}


def active_patch(active: bool) -> dict[str, Any]:
    """A Workload deactivated (evicted if admitted, never admitted while inactive) or reactivated."""
    return {"spec": {"active": active}}


# --- list -----------------------------------------------------------------------------------


def age(obj: Obj, now: datetime) -> str:
    """How long ago the object was created, the way kubectl writes it (``42s``, ``3m12s``, ``5h``)."""
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    created = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    return human_duration(int((now - created).total_seconds()))


def human_duration(seconds: int) -> str:
    seconds = max(seconds, 0)
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if days < 2:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d" if days < 365 * 2 else f"{days // 365}y"


def _condition_true(obj: Obj, kind: str) -> dict[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind and condition.get("status") == "True":
            return dict(condition)
    return None


def is_active(cluster_queue: Obj) -> bool:
    return _condition_true(cluster_queue, "Active") is not None


def cluster_queue_row(cq: Obj, now: datetime, wide: bool) -> list[str]:
    spec, status = cq.get("spec") or {}, cq.get("status") or {}
    row = [
        str(cq["metadata"]["name"]),
        str(spec.get("cohort") or spec.get("cohortName") or ""),
        str(status.get("pendingWorkloads", 0)),
        str(status.get("admittedWorkloads", 0)),
        str(is_active(cq)).lower(),
        age(cq, now),
    ]
    if wide:
        row += [str(spec.get("queueingStrategy") or ""), str(spec.get("stopPolicy") or "None")]
    return row


CLUSTER_QUEUE_HEADER = ["NAME", "COHORT", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "ACTIVE", "AGE"]
CLUSTER_QUEUE_WIDE = ["QUEUEING STRATEGY", "STOP POLICY"]


def local_queue_row(lq: Obj, now: datetime, wide: bool) -> list[str]:
    spec, status = lq.get("spec") or {}, lq.get("status") or {}
    row = [
        str(lq["metadata"]["name"]),
        str(spec.get("clusterQueue") or ""),
        str(status.get("pendingWorkloads", 0)),
        str(status.get("admittedWorkloads", 0)),
        age(lq, now),
    ]
    if wide:
        row.append(str(spec.get("stopPolicy") or "None"))
    return row


LOCAL_QUEUE_HEADER = ["NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "AGE"]
LOCAL_QUEUE_WIDE = ["STOP POLICY"]

# `list workload --status` values and the phases (cli_views.workload_phase) each selects.
WORKLOAD_STATUSES = {
    "pending": {"Pending", "Inadmissible"},
    "quotareserved": {"QuotaReserved"},
    "admitted": {"Admitted", "Evicting"},
    "finished": {"Finished"},
}


def status_filter(values: Sequence[str]) -> set[str] | None:
    """The phases ``--status`` keeps; None for all."""
    phases: set[str] = set()
    for value in values:
        key = value.lower()
        if key == "all":
            return None
        if key not in WORKLOAD_STATUSES:
            raise FlagError(f"--status {value!r}: expected all, {', '.join(WORKLOAD_STATUSES)}")
        phases |= WORKLOAD_STATUSES[key]
    return phases or None


def workload_cluster_queue(wl: Obj, local_queues: Mapping[tuple[str, str], Obj]) -> str:
    """Admitted: the ClusterQueue that admitted it; else the one its LocalQueue leads to."""
    admission = (wl.get("status") or {}).get("admission") or {}
    if admission.get("clusterQueue"):
        return str(admission["clusterQueue"])
    key = (str(wl["metadata"].get("namespace") or ""), str((wl.get("spec") or {}).get("queueName") or ""))
    lq = local_queues.get(key)
    return str(((lq or {}).get("spec") or {}).get("clusterQueue") or "")


def _exec_time(wl: Obj, now: datetime) -> str:
    admitted = _condition_true(wl, "Admitted")
    if admitted is None or not admitted.get("lastTransitionTime"):
        return ""
    finished = _condition_true(wl, "Finished")
    end = now
    if finished is not None and finished.get("lastTransitionTime"):
        end = datetime.fromisoformat(str(finished["lastTransitionTime"]).replace("Z", "+00:00"))
    start = datetime.fromisoformat(str(admitted["lastTransitionTime"]).replace("Z", "+00:00"))
    return human_duration(int((end - start).total_seconds()))


def _group(owner_ref: Obj) -> str:
    return str(owner_ref.get("apiVersion") or "").rpartition("/")[0]


def _owner_types(wl: Obj) -> tuple[str, str]:
    refs = wl["metadata"].get("ownerReferences") or []
    types = sorted({".".join(filter(None, (str(r["kind"]).lower(), _group(r)))) for r in refs})
    names = sorted({str(r["name"]) for r in refs})
    return ", ".join(types), ", ".join(names)


def owned_by(wl: Obj, owner: str) -> bool:
    """``--for TYPE[.GROUP]/NAME``: the Workload has that owner (TYPE its kind, any case)."""
    kind_group, slash, name = owner.partition("/")
    kind, _, group = kind_group.partition(".")
    if not slash or not kind or not name:
        raise FlagError(f"--for {owner!r}: expected TYPE[.GROUP]/NAME, e.g. rayjob/train")
    return any(
        str(ref.get("kind", "")).lower() == kind.lower()
        and ref.get("name") == name
        and (not group or _group(ref) == group)
        for ref in wl["metadata"].get("ownerReferences") or ()
    )


def workload_row(wl: Obj, local_queues: Mapping[tuple[str, str], Obj], now: datetime) -> list[str]:
    job_type, job_name = _owner_types(wl)
    return [
        str(wl["metadata"]["name"]),
        job_type,
        job_name,
        str((wl.get("spec") or {}).get("queueName") or ""),
        workload_cluster_queue(wl, local_queues),
        workload_phase(wl).upper(),
        _exec_time(wl, now),
        age(wl, now),
    ]


WORKLOAD_HEADER = [
    "NAME",
    "JOB TYPE",
    "JOB NAME",
    "LOCALQUEUE",
    "CLUSTERQUEUE",
    "STATUS",
    "EXEC TIME",
    "AGE",
]


def utc_now() -> datetime:
    return datetime.now(UTC)
