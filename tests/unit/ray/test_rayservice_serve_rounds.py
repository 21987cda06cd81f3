"""A RayService's Serve rounds run off the reconcile: one per service and cluster, its answer
re-queues the service, the last state read stands while a round is in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

from rayquota.operator.core.cache.store import Store
from rayquota.operator.core.resources import ObjectKey
from rayquota.operator.ray.rayjob.dashboard_calls import Answer, NoAnswerYet
from rayquota.operator.ray.rayservice.incremental import ClusterShare, UpgradeProgress
from rayquota.operator.ray.rayservice.serve_client import serve_config
from rayquota.operator.ray.rayservice.serve_rounds import ServeRound, ServeRounds
from rayquota.operator.ray.rayservice.serve_status import ServeState
from rayquota.operator.ray.rayservice.traffic import ReconcilePass, ServeTraffic
from rayquota.operator.ray.rayservice.writes import RayServiceWrites
from rayquota.operator.ray.vocabulary import labels
from tests.polling import wait_for_async

RUNNING = ServeState(applications={"app": {"status": "RUNNING"}}, target_capacity=None, healthy_proxies=1)
FAILED = ServeState(applications={"app": {"status": "DEPLOY_FAILED", "message": "told to fail"}})
SERVICE = {"metadata": {"namespace": "ns", "name": "svc"}}
CLUSTER = {"metadata": {"namespace": "ns", "name": "svc-a"}}
CONFIG = "applications: [{name: app, import_path: m:app}]"


class Serve:
    """Serve on one cluster: answers its state when the test lets it, records deploys."""

    def __init__(self, state: ServeState) -> None:
        self.state_now = state
        self.gate = asyncio.Event()
        self.deploys: list[Mapping[str, Any]] = []

    async def state(self) -> ServeState:
        await self.gate.wait()
        return self.state_now

    async def deploy(self, config: Mapping[str, Any]) -> None:
        self.deploys.append(config)


class Writes:
    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.resolver = self
        self.events: list[tuple[str, str]] = []

    def event(self, obj: Mapping[str, Any], reason: str, message: str, warning: bool = False) -> None:
        self.events.append((reason, message))

    def dashboard_url(self, cluster: Mapping[str, Any]) -> str:
        return "http://127.0.0.1:8265"

    async def serve_client(self, cluster: Mapping[str, Any]) -> Serve:
        return self.serve

    async def label_head_pod(self, pod: Mapping[str, Any], serving: bool) -> None:
        pass


def rounds_on(serve: Serve, requeued: list[ObjectKey]) -> ServeRounds:
    return ServeRounds(cast(RayServiceWrites, Writes(serve)), requeued.append)


def test_a_round_in_flight_answers_later_requeues_the_service_and_keeps_the_last_state() -> None:
    async def run() -> None:
        serve, requeued = Serve(RUNNING), []
        rounds = rounds_on(serve, requeued)
        assert await rounds.round(SERVICE, CLUSTER, CONFIG, None, False) is NoAnswerYet.IN_FLIGHT
        assert rounds.last_state(SERVICE, CLUSTER) is None
        serve.gate.set()
        await wait_for_async("the answer re-queues the service", lambda: bool(requeued), timeout_s=5)
        assert requeued == [ObjectKey("ns", "svc")]
        answer = await rounds.round(SERVICE, CLUSTER, CONFIG, None, False)
        assert isinstance(answer, Answer) and answer.value == ServeRound(RUNNING, deployed=False)
        assert serve.deploys == [] and rounds.last_state(SERVICE, CLUSTER) == RUNNING

        serve.gate.clear()  # the next round is in flight: the state read last stands
        assert await rounds.round(SERVICE, CLUSTER, CONFIG, None, False) is NoAnswerYet.IN_FLIGHT
        assert rounds.last_state(SERVICE, CLUSTER) == RUNNING
        rounds.forget(ObjectKey("ns", "svc"))
        assert rounds.last_state(SERVICE, CLUSTER) is None and rounds.calls.in_flight == 0
        await rounds.close()

    asyncio.run(run())


def test_a_round_that_deploys_leaves_no_state_to_stand_for_the_new_config() -> None:
    async def run() -> None:
        serve, requeued = Serve(RUNNING), []
        serve.gate.set()
        rounds = rounds_on(serve, requeued)

        async def answered() -> Answer | None:  # the same round, read once it has answered
            answer = await rounds.round(SERVICE, CLUSTER, CONFIG, 50, True)
            return answer if isinstance(answer, Answer) else None

        answer = await wait_for_async("the deploying round's answer", answered, timeout_s=5, interval_s=0.01)
        assert isinstance(answer, Answer) and answer.value == ServeRound(RUNNING, deployed=True)
        assert serve.deploys and serve.deploys[0]["target_capacity"] == 50
        assert rounds.last_state(SERVICE, CLUSTER) is None
        await rounds.close()

    asyncio.run(run())


def test_a_changed_config_drops_the_round_in_flight() -> None:
    async def run() -> None:
        serve, requeued = Serve(RUNNING), []
        rounds = rounds_on(serve, requeued)
        assert await rounds.round(SERVICE, CLUSTER, CONFIG, None, False) is NoAnswerYet.IN_FLIGHT
        assert await rounds.round(SERVICE, CLUSTER, CONFIG + "\n", None, True) is NoAnswerYet.IN_FLIGHT
        assert rounds.calls.in_flight == 1
        serve.gate.set()
        await wait_for_async("one answer", lambda: bool(requeued), timeout_s=5)
        await asyncio.sleep(0)
        assert requeued == [ObjectKey("ns", "svc")]  # the dropped round's answer is never delivered
        await rounds.close()

    asyncio.run(run())


READY_HEAD = {
    "metadata": {"namespace": "ns", "name": "svc-a-head"},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
}


def traffic_on(writes: Writes, rounds: ServeRounds) -> ServeTraffic:
    """Serve traffic whose clusters all have a ready head."""
    return ServeTraffic(cast(RayServiceWrites, writes), lambda cluster: READY_HEAD, cast(Store, None), rounds)


def service_with_config() -> dict[str, Any]:
    return {**SERVICE, "spec": {"serveConfigV2": CONFIG}, "status": {}}


def cluster_with_config() -> dict[str, Any]:
    """A cluster the service's Serve config was applied to."""
    return {"metadata": {**CLUSTER["metadata"], "annotations": {labels.SERVE_CONFIG_ANNOTATION: CONFIG}}}


def test_a_first_look_with_the_round_in_flight_leaves_serve_unasked() -> None:
    """A new operator's first pass over a serving RayService (as after a migration from KubeRay):
    no state read yet and the round in flight, so Serve counts as not asked and the stored Ready
    stands; a last state read stands for it once there is one. (Before the fix the pass recorded
    "no answer", and the status went from Running to not ready until the round answered.)"""

    async def run() -> None:
        serve, requeued = Serve(RUNNING), []
        rounds = rounds_on(serve, requeued)
        traffic = traffic_on(Writes(serve), rounds)
        service, applied = service_with_config(), cluster_with_config()
        first = ReconcilePass(service, {}, applied, None)
        await traffic.observe(first)
        assert "svc-a" not in first.serve
        serve.gate.set()
        await wait_for_async("the answer re-queues the service", lambda: bool(requeued), timeout_s=5)
        answered = ReconcilePass(service, {}, applied, None)
        await traffic.observe(answered)
        assert answered.serve == {"svc-a": RUNNING}
        serve.gate.clear()  # the next round in flight: the state read last stands
        rounds.calls.drop(("ns", "svc", "svc-a"))
        later = ReconcilePass(service, {}, applied, None)
        await traffic.observe(later)
        assert later.serve == {"svc-a": RUNNING}
        await rounds.close()

    asyncio.run(run())


def test_a_failure_read_before_stands_with_its_reason_while_the_next_round_is_in_flight() -> None:
    """The new cluster's application failed: a pass whose round is still in flight says why the
    upgrade waits from the state read last, and does not report the failure again. (Before the fix
    such a pass kept the failed application statuses but dropped the reason from UpgradeInProgress,
    as clean-clone CI saw under load.)"""

    async def run() -> None:
        serve, requeued = Serve(FAILED), []
        rounds = rounds_on(serve, requeued)
        writes = Writes(serve)
        traffic = traffic_on(writes, rounds)
        service, pending = service_with_config(), cluster_with_config()
        serve.gate.set()  # Serve answers within the pass
        answered = ReconcilePass(service, {}, None, pending)
        await traffic.observe(answered)
        assert "told to fail" in answered.waiting_for
        status = {
            "pendingServiceStatus": {"rayClusterName": "svc-a", "applicationStatuses": FAILED.applications}
        }
        serve.gate.clear()  # the next round in flight
        rounds.calls.drop(("ns", "svc", "svc-a"))
        later = ReconcilePass(service, status, None, pending)
        await traffic.observe(later)
        assert later.serve == {"svc-a": FAILED}
        assert "told to fail" in later.waiting_for
        assert [reason for reason, _ in writes.events] == ["ServeApplicationFailed"]
        await rounds.close()

    asyncio.run(run())


class DeployingWrites(Writes):
    """Writes whose direct deploys (an incremental step's new capacity) go to the same Serve."""

    async def deploy(self, service: Mapping[str, Any], cluster: Mapping[str, Any], config: str,
                     capacity: int | None) -> None:  # fmt: skip
        self.serve.deploys.append(serve_config(config, capacity))


def test_a_step_waits_while_a_round_started_with_the_old_capacity_may_still_deploy_it() -> None:
    """An incremental step gives the pending cluster 50 % while that cluster's round, started with
    the recorded 0 %, is still under way: the round would read 50, find it is not its 0, and put 0
    back, while the status says 50 (clean-clone CI: the pending head at 0 under a status of 50).
    The step waits until the round has answered."""

    async def run() -> None:
        serve, requeued = Serve(RUNNING), []
        rounds = rounds_on(serve, requeued)
        writes = DeployingWrites(serve)
        traffic = traffic_on(writes, rounds)
        service, pending = service_with_config(), cluster_with_config()
        active = {"metadata": {"namespace": "ns", "name": "svc-old"}}
        before = UpgradeProgress.start()
        after = UpgradeProgress(before.active, ClusterShare(50, 0))
        assert await rounds.round(service, pending, CONFIG, 0, False) is NoAnswerYet.IN_FLIGHT
        current = ReconcilePass(service, {}, active, pending)
        assert not await traffic._apply_capacity(current, before, after)
        assert serve.deploys == []
        serve.gate.set()  # the round answers (and deploys its 0 to a Serve that had none)
        await wait_for_async("the round's answer", lambda: bool(requeued), timeout_s=5)
        assert [d["target_capacity"] for d in serve.deploys] == [0]
        later = ReconcilePass(service, {}, active, pending)
        assert await traffic._apply_capacity(later, before, after)
        assert [d["target_capacity"] for d in serve.deploys] == [0, 50]  # the step's capacity last
        await rounds.close()

    asyncio.run(run())
