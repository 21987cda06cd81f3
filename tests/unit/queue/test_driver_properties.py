"""Random streams of create / scale / upgrade / delete / preempt / restart through the driver.

A fake cluster stands beside the driver: each object has pods per pod set, created only
up to what its admission covers (the planner cap), deleted when the object is evicted,
scaled down or deleted, and reported gone one step later. After every step the harness
checks design.md's invariants:

- usage within quota at every node (each queue within nominal + what the cohort lends;
  the cohort within its total);
- engine usage per queue equals the sum of the workloads holding quota (no double count),
  and at most one slice per workload holds quota;
- no pod set has more pods than its admission covers;
- quota is released only after the pods that held it are gone;
- a restart rebuilt from what the API server holds admits nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rayquota.operator.queue.admission.driver import Driver, workload_key_of
from rayquota.queueing import Engine
from tests.unit.queue.fakes import GPU, NAMESPACE, RecordingWriter, gpu_workload, two_teams

NOMINAL = 8
POD_SETS = ("w1", "w2")


@dataclass
class FakeObject:
    name: str
    queue: str
    priority: int
    created: float
    desired: dict[str, int]
    pods: dict[str, int] = field(default_factory=dict)
    deleted: bool = False

    @property
    def key(self) -> str:
        return f"{NAMESPACE}/{self.name}"


class Harness:
    def __init__(self) -> None:
        self.writer = RecordingWriter()
        self.driver = self._new_driver(self.writer)
        self.objects: dict[str, FakeObject] = {}
        self.clock = 0.0

    @staticmethod
    def _new_driver(writer: RecordingWriter) -> Driver:
        driver = Driver(Engine(), writer)
        for obj in two_teams(NOMINAL):
            driver.configure(obj)
        return driver

    def held(self, obj: FakeObject) -> dict[str, int]:
        """Demand as the reconciler reports it: never below the pods still alive."""
        return {ps: max(obj.desired.get(ps, 0), obj.pods.get(ps, 0)) for ps in POD_SETS}

    def submit(self, obj: FakeObject) -> None:
        self.driver.submit(gpu_workload(obj.name, obj.queue, self.held(obj), obj.priority, obj.created))

    # --- events ---------------------------------------------------------------------------

    def create(self, name: str, queue: str, priority: int, w1: int, w2: int) -> None:
        if name in self.objects:
            return
        self.clock += 1
        obj = FakeObject(name, queue, priority, self.clock, {"w1": w1, "w2": w2})
        self.objects[name] = obj
        self.submit(obj)

    def scale(self, name: str, pod_set: str, count: int) -> None:
        obj = self.objects.get(name)
        if obj is None or obj.deleted:
            return
        obj.desired[pod_set] = count
        self.submit(obj)

    def delete(self, name: str) -> None:
        obj = self.objects.get(name)
        if obj is not None:
            obj.deleted = True

    def kubelet(self) -> None:
        """One reconcile of every object: pods down to what is allowed, then up to the cap."""
        for obj in list(self.objects.values()):
            evicting = self.driver.is_evicting(obj.key)
            admission = self.driver.admission(obj.key)
            had_pods = any(obj.pods.values())
            if obj.deleted or evicting or admission is None:
                obj.pods = {}
            else:
                caps = admission.counts()
                for ps in POD_SETS:
                    obj.pods[ps] = min(obj.desired.get(ps, 0), caps.get(ps, 0))
            if obj.deleted:
                self.driver.remove(obj.key)
                del self.objects[obj.name]
                continue
            if evicting:
                self.driver.pods_gone(obj.key)
            if had_pods or evicting:
                self.submit(obj)

    def cycle(self) -> None:
        self.clock += 1
        self.driver.cycle(self.clock)

    def restart(self) -> None:
        """A new engine and driver rebuilt from what the API server holds."""
        writer = RecordingWriter()
        driver = self._new_driver(writer)
        for obj in self.objects.values():
            admission = self.driver.admission(obj.key)
            evicting = self.driver.is_evicting(obj.key)
            recorded = self.writer.admissions.get(obj.key)
            if recorded is not None and (admission is not None or evicting):
                spec = gpu_workload(obj.name, obj.queue, self.held(obj), obj.priority, obj.created)
                driver.restore(spec, recorded.cluster_queue, recorded.pod_sets, evicting=evicting)
        before = {cq: self.driver.engine.usage(cq) for cq in ("a", "b")}
        after = {cq: driver.engine.usage(cq) for cq in ("a", "b")}
        assert {k: {fr: v for fr, v in u.items() if v} for k, u in before.items()} == {
            k: {fr: v for fr, v in u.items() if v} for k, u in after.items()
        }
        writer.admissions = dict(self.writer.admissions)
        self.writer, self.driver = writer, driver
        for obj in self.objects.values():
            self.submit(obj)

    # --- invariants -----------------------------------------------------------------------

    def check(self) -> None:
        engine = self.driver.engine
        holding: dict[str, list[str]] = {}
        per_queue: dict[str, int] = {"a": 0, "b": 0}
        for engine_key in engine.workload_keys():
            status = engine.workload(engine_key)
            assert status is not None
            if status.phase == "Pending":
                continue
            holding.setdefault(workload_key_of(engine_key), []).append(engine_key)
            assert status.cluster_queue is not None
            per_queue[status.cluster_queue] += status.usage.get(("f", GPU), 0)
        for key, slices in holding.items():
            assert len(slices) == 1, f"{key} holds quota through {slices}"
        total = 0
        for cq in ("a", "b"):
            used = engine.usage(cq).get(("f", GPU), 0)
            assert used == per_queue[cq]
            assert used <= 2 * NOMINAL * 1000
            total += used
        assert total <= 2 * NOMINAL * 1000
        for obj in self.objects.values():
            live_gpus = sum(int(ps[1:]) * n for ps, n in obj.pods.items()) * 1000
            slices = holding.get(obj.key, [])
            held = sum(engine.workload(k).usage.get(("f", GPU), 0) for k in slices)  # type: ignore[union-attr]
            assert live_gpus <= held, f"{obj.key}: pods use {live_gpus} but only {held} is held"
            admission = self.driver.admission(obj.key)
            if admission is not None:
                for ps, n in obj.pods.items():
                    assert n <= admission.counts().get(ps, 0)


names = st.sampled_from(["j0", "j1", "j2", "j3", "j4"])
events = st.one_of(
    st.tuples(
        st.just("create"),
        names,
        st.sampled_from(["a", "b"]),
        st.integers(0, 3),
        st.integers(0, 10),
        st.integers(0, 4),
    ),
    st.tuples(st.just("scale"), names, st.sampled_from(POD_SETS), st.integers(0, 10)),
    st.tuples(st.just("upgrade"), names, st.integers(1, 4)),
    st.tuples(st.just("delete"), names),
    st.tuples(st.just("restart")),
)
# After most events the engine cycles and the reconcilers act; sometimes they lag behind.
steps = st.tuples(events, st.booleans(), st.booleans())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(steps, min_size=1, max_size=60))
def test_random_event_streams_keep_the_invariants(
    stream: list[tuple[tuple[object, ...], bool, bool]],
) -> None:
    harness = Harness()
    for event, then_cycle, then_kubelet in stream:
        match event:
            case ("create", name, queue, priority, w1, w2):
                harness.create(str(name), str(queue), int(str(priority)), int(str(w1)), int(str(w2)))
            case ("scale", name, pod_set, count):
                harness.scale(str(name), str(pod_set), int(str(count)))
            case ("upgrade", name, count):
                # Like a RayService upgrade: a second shape appears beside the first ...
                harness.scale(str(name), "w2", int(str(count)))
                harness.cycle()
                harness.kubelet()
                # ... and the old one goes once the new one runs.
                harness.scale(str(name), "w1", 0)
            case ("delete", name):
                harness.delete(str(name))
            case ("restart",):
                harness.restart()
        harness.check()
        if then_cycle:
            harness.cycle()
            harness.check()
        if then_kubelet:
            harness.kubelet()
            harness.check()
    # Drain: everything deleted, every pod gone, nothing held.
    for name in list(harness.objects):
        harness.delete(name)
    harness.kubelet()
    harness.cycle()
    for cq in ("a", "b"):
        assert not any(harness.driver.engine.usage(cq).values())
