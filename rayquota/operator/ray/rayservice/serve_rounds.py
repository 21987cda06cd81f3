"""Serve health checks and deploys of a RayService, off the reconcile workers.

A round asks Serve on one cluster for its applications and, when the cluster lacks the wanted
config or capacity, deploys it. Rounds run as tasks (rayjob/dashboard_calls: one per RayService
and cluster, a bound in all); a reconcile starts one and waits only a moment, a late answer
re-queues the RayService and the next reconcile reads it. A dashboard that does not answer costs
its own RayService's progress, never a worker.

While a round is in flight the reconcile sees the last healthy state read without a deploy (no
state after a deploy: it described the old config).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.operator.core.resources import ObjectKey
from rayquota.operator.ray.rayjob.dashboard_calls import Answer, DashboardCalls, NoAnswerYet, Purpose
from rayquota.operator.ray.rayservice.serve_client import serve_config
from rayquota.operator.ray.rayservice.serve_status import ServeState
from rayquota.operator.ray.rayservice.writes import RayServiceWrites

ROUND = "serve"
# Per RayService and cluster, at most one round; in all, at most this many.
ROUNDS_IN_FLIGHT = 64
# Long enough for a dashboard on loopback to answer within the reconcile.
ANSWER_WAIT_S = 0.05

RoundKey = tuple[str, str, str]  # namespace, RayService, RayCluster


@dataclass(frozen=True)
class ServeRound:
    """What Serve said, and whether the wanted config was deployed after it said it."""

    state: ServeState
    deployed: bool


def _purpose(address: str, config: str, capacity: int | None, redeploy: bool) -> Purpose:
    digest = hashlib.sha256(config.encode()).hexdigest()[:16]
    return Purpose(ROUND, f"{digest}/{capacity}/{redeploy}", address)


class ServeRounds:
    def __init__(self, writes: RayServiceWrites, requeue: Callable[[ObjectKey], None]) -> None:
        self.writes = writes
        self.calls: DashboardCalls[RoundKey] = DashboardCalls(
            lambda key: requeue(ObjectKey(key[0], key[1])),
            limit=ROUNDS_IN_FLIGHT,
            answer_wait_s=ANSWER_WAIT_S,
        )
        self._last: dict[RoundKey, ServeState] = {}
        self._clusters: dict[ObjectKey, set[str]] = {}

    async def round(
        self,
        service: Mapping[str, Any],
        cluster: Mapping[str, Any],
        config: str,
        capacity: int | None,
        redeploy: bool,
    ) -> Answer | NoAnswerYet:
        """The answer of the cluster's round (value: ServeRound), if there is one yet. `redeploy`:
        the cluster's recorded config is not `config`, so deploy whatever Serve says. Raises
        LookupError when the cluster's dashboard has no address."""
        meta, name = service["metadata"], str(cluster["metadata"]["name"])
        key: RoundKey = (str(meta["namespace"]), str(meta["name"]), name)
        self._clusters.setdefault(ObjectKey(key[0], key[1]), set()).add(name)
        address = self.writes.resolver.dashboard_url(cluster)
        snapshot = dict(cluster)
        answer = await self.calls.call(
            key,
            _purpose(address, config, capacity, redeploy),
            lambda: self._run(snapshot, config, capacity, redeploy),
        )
        if isinstance(answer, Answer):
            value = answer.value
            if answer.error is None and isinstance(value, ServeRound) and not value.deployed:
                self._last[key] = value.state
            else:
                self._last.pop(key, None)
        return answer

    def running(self, service: Mapping[str, Any], cluster: Mapping[str, Any]) -> bool:
        """A round on the cluster is under way: it may still deploy the capacity it was started
        with, so nothing else may deploy to that Serve meanwhile (the later write would lose)."""
        meta = service["metadata"]
        return self.calls.running(
            (str(meta["namespace"]), str(meta["name"]), str(cluster["metadata"]["name"]))
        )

    def last_state(self, service: Mapping[str, Any], cluster: Mapping[str, Any]) -> ServeState | None:
        meta = service["metadata"]
        return self._last.get((str(meta["namespace"]), str(meta["name"]), str(cluster["metadata"]["name"])))

    def forget(self, service: ObjectKey, keep: Collection[str] = ()) -> None:
        """Drop the rounds and states of the service's clusters not in `keep` (gone, retired)."""
        names, kept = self._clusters.get(service, set()), set(keep)
        for name in names - kept:
            key: RoundKey = (service.namespace, service.name, name)
            self.calls.drop(key)
            self._last.pop(key, None)
        if kept & names:
            self._clusters[service] = kept & names
        else:
            self._clusters.pop(service, None)

    async def close(self) -> None:
        await self.calls.close()

    async def _run(
        self, cluster: Mapping[str, Any], config: str, capacity: int | None, redeploy: bool
    ) -> ServeRound:
        client = await self.writes.serve_client(cluster)
        state = await client.state()
        if redeploy or not state.applications or state.target_capacity != capacity:
            await client.deploy(serve_config(config, capacity))
            return ServeRound(state, deployed=True)
        return ServeRound(state, deployed=False)
