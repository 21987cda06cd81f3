"""The gate matrix's JobSet cells: a JobSet of a driver and two single-GPU workers, with
tests/jobset_controller.py playing JobSet's controller in the cell's namespace and the
Kubernetes Job controller making the pods; its sampler watches the JobSets too, so a Job of a
JobSet unsuspended, or a pod of it, while its Workload records no admission is a violation.

Written unsuspended without the webhook, JobSet's controller may create the Jobs unsuspended
and the Job controller start their pods before the queue's gate holds the JobSet (no webhook
runs first: docs/operations.md). That cell leaves exactly those Jobs, up to their first
suspension, and their pods out of the judging (tests/gate_early_start.py), checks that the gate
then stopped them all, and judges everything else as strictly as the other cells.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tests.gate_early_start import EarlyStart
from tests.integration.queue.gate_cells import GPUS, QUEUE, Env
from tests.integration.queue.jobsets import gpu_jobset, pods_of

VICTIM, PREEMPTOR = "train", "urgent"


def jobset_running(env: Env, name: str, count: int) -> Callable[[], bool]:
    return lambda: len(pods_of(env.sampler.current("Pod").values(), name, running=True)) == count


def body(env: Env, name: str, workers: int, **labels: str) -> dict[str, Any]:
    # Unsuspended: the field left out, as most users write it (the webhook, if on, sets it).
    return gpu_jobset(
        name,
        QUEUE,
        workers=workers,
        pods_per_worker=1,
        suspend=True if env.cell.suspended else None,
        **labels,
    )


def jobset_scenario(env: Env) -> None:
    """Preempted by a JobSet of all the queue's GPUs (deleted afterwards: its Jobs and pods go
    by the garbage collector), and deactivated and activated again."""
    running = jobset_running(env, VICTIM, 3)
    env.kube.apply(body(env, VICTIM, 2))
    env.wait("the JobSet running, placed", running)
    for transition in env.cell.transitions:
        if transition == "suspend-resume":
            env.suspend_and_resume("JobSet", VICTIM, running)
        elif transition == "preemption":
            high = {"rayquota.io/priority-class": env.quota.name("high")}
            env.kube.apply(body(env, PREEMPTOR, GPUS, **high))
            env.wait("the preemptor running", jobset_running(env, PREEMPTOR, 1 + GPUS))
            assert env.admitted_gpus("JobSet", VICTIM) is None and env.no_pods_of(VICTIM)
            env.kube.kubectl("delete", "jobset", PREEMPTOR, "--wait=false")
            env.wait("the victim running again", running)
        else:
            raise ValueError(transition)
    if not env.cell.suspended and not env.cell.webhooks:
        forgive_early_start(env)


def forgive_early_start(env: Env) -> None:
    """What started before the gate could hold the JobSet: stopped by it, left out of the judging."""
    env.sampler.sync()
    early = EarlyStart.of(env.sampler.versions())
    assert not early.unended(), f"{env.cell.id}: Jobs started before the gate were never suspended"
    alive = [p for p in env.sampler.current("Pod").values() if p["metadata"]["uid"] in early.pods]
    assert not alive, f"{env.cell.id}: pods started before the gate still alive: {_names(alive)}"
    assert env.sampler.ever("JobSet", _suspended(VICTIM)), (
        f"{env.cell.id}: the queue never suspended the JobSet"
    )
    env.sampler.forgive(early.covers)
    print(
        f"JOBSET-EARLY-START {env.cell.id}: {len(early.jobs)} Jobs and {len(early.pods)} pods before the gate"
    )


def _suspended(name: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda js: js["metadata"]["name"] == name and bool((js.get("spec") or {}).get("suspend"))


def _names(pods: list[Mapping[str, Any]]) -> list[str]:
    return sorted(str(p["metadata"]["name"]) for p in pods)
