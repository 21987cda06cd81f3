"""Fair sharing in the queues' status: weightedShare on ClusterQueues and Cohorts, and the
LocalQueues' admissionFairSharingStatus, as Kueue writes them."""

from __future__ import annotations

import math
from typing import Any

from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.reporting.fair_status import (
    MAX_SHARE,
    FairSharingStatus,
    restore_consumed,
    weighted_share,
)
from rayquota.queueing import (
    AdmissionFairSharing,
    AdmissionMode,
    ClusterQueue,
    Cohort,
    Engine,
    FlavorQuotas,
    LocalQueue,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
)

GPU = "nvidia.com/gpu"


def _queue(name: str, gpus: int, weight: float = 1.0, mode: AdmissionMode | None = None) -> ClusterQueue:
    quota = FlavorQuotas("a100", {GPU: ResourceQuota(gpus * 1000)})
    return ClusterQueue(
        name,
        (ResourceGroup((GPU,), (quota,)),),
        cohort="org",
        fair_sharing_weight=weight,
        admission_mode=mode or AdmissionMode.NO_ADMISSION_FAIR_SHARING,
    )


def _borrowing_engine(weight_a: float) -> Engine:
    engine = Engine(fair_sharing=True)
    engine.upsert_flavor(ResourceFlavor("a100"))
    engine.upsert_cohort(Cohort("org"))
    engine.upsert_cluster_queue(_queue("a", 2, weight_a))
    engine.upsert_cluster_queue(_queue("b", 6))
    engine.upsert_local_queue(LocalQueue("ns", "lq", "a"))
    engine.add_workload(Workload("ns", "big", "lq", (PodSet.of("w", 5, {GPU: 1}),)))
    engine.run_cycle(0.0)
    return engine


def test_weighted_share_is_kueues_rounded_integer() -> None:
    assert weighted_share(0.0) == 0
    assert weighted_share(374.2) == 375
    assert weighted_share(math.inf) == MAX_SHARE == 9223372036854775807


def test_a_borrowing_queue_reports_its_share_of_what_the_cohort_lends_over_its_weight() -> None:
    # a borrows 3 GPUs of the 8 the cohort could lend it (Kueue counts the whole cohort's quota):
    # 375 per mille; with weight 2, 187.5, rounded up.
    for weight, expected in ((1.0, 375), (2.0, 188), (0.0, MAX_SHARE)):
        fair = FairSharingStatus(_borrowing_engine(weight), lambda: 0.0)
        fair.refresh({"a": "org", "b": "org"})
        assert fair.node_status(True, "a") == {"weightedShare": expected}
        assert fair.node_status(True, "b") == {"weightedShare": 0}
        assert fair.node_status(False, "org") == {"weightedShare": 0}


def test_no_fair_sharing_status_when_fair_sharing_is_off() -> None:
    engine = Engine()
    fair = FairSharingStatus(engine, lambda: 0.0)
    fair.refresh({})
    assert fair.node_status(True, "a") is None


def _lq(name: str, weight: str | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusterQueue": "team"}
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"metadata": {"namespace": "ns", "name": name}, "spec": spec, "status": status or {}}


def test_local_queue_status_carries_consumed_resources_sampled_each_interval() -> None:
    clock = [1_000_000.0]
    afs = AdmissionFairSharing(usage_half_life_time=60, usage_sampling_interval=60)
    engine = Engine(admission_fair_sharing=afs)
    engine.upsert_flavor(ResourceFlavor("a100"))
    engine.upsert_cluster_queue(_queue("team", 4, mode=AdmissionMode.USAGE_BASED_ADMISSION_FAIR_SHARING))
    engine.upsert_local_queue(converter.local_queue(_lq("alpha", weight="2")))
    engine.add_workload(Workload("ns", "j", "alpha", (PodSet.of("w", 2, {GPU: 1}),)))
    engine.run_cycle(clock[0])
    fair = FairSharingStatus(engine, lambda: clock[0])
    fair.refresh({})  # the first sample: settles the entry penalty (2 GPUs x 1/2)
    first = fair.local_queue_status(_lq("alpha", weight="2"))
    assert first is not None
    assert first["admissionFairSharingStatus"]["consumedResources"] == {GPU: "1"}
    clock[0] += 30
    fair.refresh({})  # within the interval: not sampled again
    assert fair.local_queue_status(_lq("alpha", weight="2")) == first
    clock[0] += 30
    fair.refresh({})  # one half-life later: halfway from 1 towards the 2 in use
    later = fair.local_queue_status(_lq("alpha", weight="2"))
    assert later is not None
    assert later["admissionFairSharingStatus"]["consumedResources"] == {GPU: "1500m"}
    assert later["admissionFairSharingStatus"]["lastUpdate"] == "1970-01-12T13:47:40Z"


def test_a_recorded_status_seeds_the_engine_after_a_restart() -> None:
    engine = Engine(admission_fair_sharing=AdmissionFairSharing(usage_half_life_time=60))
    recorded = {
        "fairSharing": {
            "weightedShare": 0,
            "admissionFairSharingStatus": {
                "consumedResources": {GPU: "3"},
                "lastUpdate": "2026-01-01T00:00:00Z",
            },
        }
    }
    restore_consumed(engine, _lq("alpha", status=recorded))
    usage = engine.local_queue_usage("ns/alpha")
    assert usage is not None and usage.consumed == {GPU: 3000.0}


def test_converter_reads_admission_scope_and_local_queue_weight() -> None:
    scope = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    body = {"metadata": {"name": "team"}, "spec": {"admissionScope": scope}}
    assert converter.cluster_queue(body).admission_mode is AdmissionMode.USAGE_BASED_ADMISSION_FAIR_SHARING
    assert converter.local_queue(_lq("alpha", weight="500m")).fair_sharing_weight == 0.5
    bad = {"metadata": {"name": "team"}, "spec": {"admissionScope": {"admissionMode": "Usage"}}}
    try:
        converter.cluster_queue(bad)
    except converter.ConversionError as error:
        assert "admissionScope.admissionMode: 'Usage'" in str(error)
    else:
        raise AssertionError("an unknown admissionMode was accepted")
