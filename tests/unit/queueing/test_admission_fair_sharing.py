"""Admission fair sharing: LocalQueues of one ClusterQueue ordered by decayed, weighted usage."""

from __future__ import annotations

import math

import pytest

from rayquota.queueing import (
    AdmissionFairSharing,
    AdmissionMode,
    Admit,
    ClusterQueue,
    Engine,
    FlavorQuotas,
    LocalQueue,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from rayquota.queueing.quota.admission_fair_sharing import UsageLedger, decay_alpha

USAGE_BASED = AdmissionMode.USAGE_BASED_ADMISSION_FAIR_SHARING


def _engine(afs: AdmissionFairSharing | None, gpus: int, mode: AdmissionMode = USAGE_BASED) -> Engine:
    engine = Engine(admission_fair_sharing=afs)
    engine.upsert_flavor(ResourceFlavor("a100"))
    quota = FlavorQuotas("a100", {"nvidia.com/gpu": ResourceQuota(gpus * 1000)})
    engine.upsert_cluster_queue(
        ClusterQueue("team", (ResourceGroup(("nvidia.com/gpu",), (quota,)),), admission_mode=mode)
    )
    engine.upsert_local_queue(LocalQueue("ns", "alpha", "team"))
    engine.upsert_local_queue(LocalQueue("ns", "beta", "team"))
    return engine


def _job(name: str, queue: str, created: float, priority: int = 0) -> Workload:
    return Workload(
        "ns", name, queue, (PodSet.of("w", 1, {"nvidia.com/gpu": 1}),), priority=priority, created=created
    )


def _admitted(engine: Engine, now: float = 0.0) -> list[str]:
    return [d.workload for d in engine.run_cycle(now) if isinstance(d, Admit)]


def test_decay_halves_after_one_half_life() -> None:
    assert decay_alpha(60, 60) == pytest.approx(0.5)
    assert decay_alpha(0, 60) == 0.0
    assert decay_alpha(300, 0) == 0.0  # no half-life: no penalty, usage reset at each sample


def test_sample_moves_consumed_towards_usage_by_the_half_life() -> None:
    ledger = UsageLedger(AdmissionFairSharing(usage_half_life_time=60, usage_sampling_interval=60))
    ledger.restore("ns/alpha", {"cpu": 8000}, last_update=0.0)
    entry = ledger.sample("ns/alpha", {"cpu": 4000}, now=60.0)
    assert entry.consumed == {"cpu": pytest.approx(6000)}
    assert entry.last_update == 60.0


def test_the_queue_that_consumed_more_waits_behind_the_other() -> None:
    engine = _engine(AdmissionFairSharing(usage_half_life_time=600), gpus=1)
    engine.restore_local_queue_usage("ns/alpha", {"nvidia.com/gpu": 4000}, 0.0)
    engine.restore_local_queue_usage("ns/beta", {"nvidia.com/gpu": 1000}, 0.0)
    engine.add_workload(_job("alpha-1", "alpha", created=1, priority=10))
    engine.add_workload(_job("beta-1", "beta", created=2))
    assert _admitted(engine) == ["ns/beta-1"]


def test_an_admission_penalty_gives_the_next_turn_to_the_other_queue_in_one_cycle() -> None:
    engine = _engine(AdmissionFairSharing(usage_half_life_time=300, usage_sampling_interval=300), gpus=2)
    for i in range(3):
        engine.add_workload(_job(f"alpha-{i}", "alpha", created=i))
    engine.add_workload(_job("beta-0", "beta", created=10))
    # Equal usage: alpha-0 is older and goes first; its penalty then puts beta ahead of alpha-1.
    assert _admitted(engine) == ["ns/alpha-0", "ns/beta-0"]


def test_without_the_configuration_or_the_mode_priority_and_age_decide() -> None:
    for engine in (
        _engine(None, gpus=1),
        _engine(AdmissionFairSharing(), gpus=1, mode=AdmissionMode.NO_ADMISSION_FAIR_SHARING),
    ):
        engine.restore_local_queue_usage("ns/alpha", {"nvidia.com/gpu": 9000}, 0.0)
        engine.add_workload(_job("alpha-1", "alpha", created=1))
        engine.add_workload(_job("beta-1", "beta", created=2))
        assert _admitted(engine) == ["ns/alpha-1"]


def test_a_weight_divides_usage_and_zero_puts_the_queue_last() -> None:
    engine = _engine(AdmissionFairSharing(), gpus=1)
    engine.upsert_local_queue(LocalQueue("ns", "alpha", "team", fair_sharing_weight=4))
    engine.upsert_local_queue(LocalQueue("ns", "beta", "team", fair_sharing_weight=0))
    engine.restore_local_queue_usage("ns/alpha", {"nvidia.com/gpu": 3000}, 0.0)
    engine.add_workload(_job("beta-1", "beta", created=1))
    engine.add_workload(_job("alpha-1", "alpha", created=2))
    assert engine.admission_usage is not None
    assert engine.admission_usage.usage("ns/alpha", 4) == pytest.approx(750)
    assert math.isinf(engine.admission_usage.usage("ns/beta", 0))
    assert _admitted(engine) == ["ns/alpha-1"]


def test_sampling_reports_every_queue_of_a_usage_based_cluster_queue() -> None:
    engine = _engine(AdmissionFairSharing(usage_half_life_time=60, usage_sampling_interval=60), gpus=2)
    engine.add_workload(_job("alpha-1", "alpha", created=1))
    assert _admitted(engine, now=0.0) == ["ns/alpha-1"]
    records = engine.sample_admission_usage(60.0)
    assert set(records) == {"ns/alpha", "ns/beta"}
    # Half of the 1 GPU in use after one half-life, plus the settled entry penalty (half a GPU).
    assert records["ns/alpha"].consumed == {"nvidia.com/gpu": pytest.approx(1000)}
    assert records["ns/beta"].consumed == {}


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("usageHalfLifeTime", {"usage_half_life_time": -1}),
        ("usageSamplingInterval", {"usage_sampling_interval": 0}),
        ("resourceWeights[cpu]", {"resource_weights": {"cpu": -2}}),
    ],
)
def test_bad_settings_name_the_field(field: str, kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        AdmissionFairSharing(**kwargs)  # type: ignore[arg-type]
