"""Generated documents of every kind users send (tests/document_strategies.py), valid and broken,
sent to the real API server with the operator's webhooks on, while an admitted RayJob runs.

Properties, for every document:
- a valid one is accepted;
- a refusal names the field and the value (the API server's schema, or our webhooks);
- the operator never exits and never logs a traceback;
- what was admitted before does not change (the RayJob's admission, its pods);
- the gate's invariants hold at every state of the namespace (tests/gate_sampler.py).

A few hundred documents run in `make test`; `RAYQUOTA_FUZZ_EXAMPLES=5000` runs more (README).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.document_strategies import DELETED, Case, Names, case
from tests.gate_sampler import GateSampler
from tests.integration.fuzz.conftest import delete_cluster_scoped
from tests.integration.queue.conftest import Quota, gpu_rayjob, pool_placement
from tests.integration.ray.kubehelpers import Kube
from tests.operator_process import OperatorProcess
from tests.polling import holds, wait_for

EXAMPLES = int(os.environ.get("RAYQUOTA_FUZZ_EXAMPLES", "300"))
CHECK_EVERY = 25  # cases between two reads of the operator's log
JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


@dataclass
class Outcomes:
    accepted: int = 0
    refused: int = 0
    problems: list[str] = field(default_factory=list)


# How Go's JSON decoder names a value's type, for the fields the API server decodes itself
# (metadata is decoded into ObjectMeta before any schema is applied).
GO_JSON_TYPES = {bool: "bool", int: "number", float: "number", str: "string", list: "array", dict: "object"}


def names_field_and_value(case: Case, message: str) -> str | None:
    """Why the refusal of `case` does not name the field it broke and the value (None: it does).

    The field: its path as Kubernetes writes it (spec.workerGroupSpecs[0].replicas), or its
    parent's with the key; for what Go's decoder refuses, ObjectMeta.<field>. The value: as
    written, or its type where the type is what is wrong; a list by its length (too many items);
    a label by its key when the key is what is wrong; nothing for a removed, null or unknown
    field."""
    mutation = case.mutation
    assert mutation is not None
    path = mutation.render_path()
    parent = path.rsplit(".", 1)[0] if "." in path else path
    last = str(mutation.path[-1]) if mutation.path else ""
    go_field = "ObjectMeta" + (f".{mutation.path[1]}" if len(mutation.path) > 1 else "")
    decoded = mutation.path[:1] == ("metadata",) and "cannot unmarshal" in message and go_field in message
    # A label is judged by the API server at the map: "metadata.labels: Invalid value: ...".
    labels = mutation.what == "bad label" and "metadata.labels" in message
    if path not in message and not (parent in message and last in message) and not decoded and not labels:
        return f"the refusal does not name {path}"
    value = mutation.value
    # A null is a removal to the API server: it drops the nulls of fields that may not be null
    # before it validates, so a required one is refused as "<field>: Required value" (seen in a
    # clean-clone run: LocalQueue spec.clusterQueue: null). The field is named, as for DELETED.
    if value is DELETED or value is None or mutation.what == "unknown field":
        return None
    shown = {json.dumps(value), str(value), JSON_TYPES.get(type(value), "null")}
    if decoded:
        shown.add(GO_JSON_TYPES.get(type(value), "null"))
    if isinstance(value, list):
        shown.add(str(len(value)))
    if isinstance(value, dict):
        shown.update(str(k) for k in value)  # an object where a string goes: its keys are named
    if isinstance(value, str):
        shown.add(value[:64])  # a long name or label is quoted, maybe cut
        shown.add(_go_quoted(value)[:64])  # Go's %q escapes what is not printable
    if mutation.what == "bad label":
        shown.add(last)  # the key may be what is wrong
    if not any(s in message for s in shown):
        return f"the refusal does not name the value {json.dumps(value)[:80]}"
    return None


def _go_quoted(text: str) -> str:
    return "".join(
        c if c.isprintable() else (f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}")
        for c in text
    )


@pytest.fixture
def sentinel(
    control_plane: Any, fuzz_namespace: str, fuzz_operator: OperatorProcess
) -> Iterator[tuple[Quota, GateSampler]]:
    """A RayJob admitted to a ClusterQueue whose quota it fills exactly, in a namespace of its
    own watched by a sampler for the run (the fuzzed documents, some of them not queued at all,
    go to another). The fuzz namespace's LocalQueue `team` leads to the same ClusterQueue:
    nothing fuzzed can be admitted beside the RayJob."""
    home = f"{fuzz_namespace}-sentinel"
    control_plane.kubectl("create", "namespace", home)
    quota = Quota(control_plane, home)
    cq = quota.a100_team_queue(2)
    Quota(control_plane, fuzz_namespace).local_queue("team", cq)
    sampler = GateSampler(str(control_plane.kubeconfig), home, cq, pool_placement("a100")).start()
    kube = Kube(control_plane, home)
    try:
        kube.apply(gpu_rayjob("sentinel", "team", workers=1, gpus_per_worker=2))
        wait_for("the sentinel RayJob admitted", lambda: _sentinel_admission(sampler), timeout_s=120)
        wait_for("its pods running", lambda: _running_pods(sampler) == 2, timeout_s=120)
        usage = _sentinel_admission(sampler)["podSetAssignments"]
        exact: dict[str, int] = {}
        for ps in usage:
            for resource, value in (ps.get("resourceUsage") or {}).items():
                exact[resource] = exact.get(resource, 0) + _milli(value)
        # The quota is what the sentinel uses, to the milli-unit: nothing else fits.
        got = control_plane.kubectl("get", "clusterqueue.rayquota.io", cq, "-o", "json")
        cluster_queue = json.loads(got.stdout)
        for group in cluster_queue["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                for resource in flavor["resources"]:
                    resource["nominalQuota"] = f"{exact.get(resource['name'], 0)}m"
        # A merge patch of the spec alone: a replace carries the resourceVersion read above and
        # conflicts with the operator's status writes in between.
        groups = {"spec": {"resourceGroups": cluster_queue["spec"]["resourceGroups"]}}
        control_plane.kubectl(
            "patch", "clusterqueue.rayquota.io", cq, "--type", "merge", "-p", json.dumps(groups)
        )
        yield quota, sampler
        sampler.assert_holds()
    finally:
        sampler.close()
        quota.delete_all()
        control_plane.kubectl("delete", "namespace", home, "--wait=false", check=False)


def _milli(value: str) -> int:
    from rayquota.queueing import parse_quantity

    return parse_quantity(value)


def _sentinel_admission(sampler: GateSampler) -> dict[str, Any] | None:
    for wl in sampler.current("Workload").values():
        if (wl["metadata"].get("labels") or {}).get("rayquota.io/owner-name") == "sentinel":
            admission = (wl.get("status") or {}).get("admission")
            return dict(admission) if admission else None
    return None


def _running_pods(sampler: GateSampler) -> int:
    return sum(
        1
        for name, pod in sampler.current("Pod").items()
        if name.startswith("sentinel-") and (pod.get("status") or {}).get("phase") == "Running"
    )


def test_fuzzed_documents_are_refused_by_name_or_handled(
    control_plane: Any,
    fuzz_namespace: str,
    fuzz_operator: OperatorProcess,
    sentinel: tuple[Quota, GateSampler],
    tmp_path: Path,
) -> None:
    quota, sampler = sentinel
    admission = _sentinel_admission(sampler)
    pods = {n for n in sampler.current("Pod") if n.startswith("sentinel-")}
    prefix = f"zz{secrets.token_hex(2)}"
    names = Names(fuzz_namespace, prefix, "team", quota.name("team"), quota.name("a100"))
    api = config.new_client_from_config(config_file=str(control_plane.kubeconfig))
    custom = client.CustomObjectsApi(api)
    outcomes = Outcomes()
    counter = [0]
    reported: set[str] = set()  # tracebacks already reported
    record = (tmp_path / "fuzz-outcomes.jsonl").open("w")  # every case and its answer, for review

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        # One live system, not a pure function: no replay and no shrinking, every case is new.
        phases=[Phase.generate],
    )
    @given(case(names))
    def one(drawn: Case) -> None:
        counter[0] += 1
        document = drawn.document
        meta = document.get("metadata")
        if (
            isinstance(meta, dict)
            and isinstance(meta.get("name"), str)
            and (drawn.mutation is None or drawn.mutation.path[:2] != ("metadata", "name"))
        ):
            meta["name"] = f"{prefix}-{counter[0]}"  # unique: a name drawn twice is no finding
        try:
            if drawn.namespaced:
                custom.create_namespaced_custom_object(
                    drawn.group,
                    _version(drawn),
                    fuzz_namespace,
                    drawn.plural,
                    document,
                    field_validation="Strict",
                )
            else:
                custom.create_cluster_custom_object(
                    drawn.group, _version(drawn), drawn.plural, document, field_validation="Strict"
                )
            outcomes.accepted += 1
            record.write(json.dumps({"case": repr(drawn), "answer": 201}) + "\n")
        except ApiException as exc:
            outcomes.refused += 1
            message = _message(exc)
            record.write(json.dumps({"case": repr(drawn), "answer": exc.status, "message": message}) + "\n")
            if exc.status == 409:
                pass  # a name (deliberately broken, so not made unique) drawn twice
            elif (
                exc.status >= 500
                or exc.status in (401, 404)
                or (
                    exc.status == 403 and "denied the request" not in message  # else our webhooks' refusal
                )
            ):
                outcomes.problems.append(f"{drawn!r}: answered {exc.status}: {message}")
            elif drawn.mutation is None:
                outcomes.problems.append(f"{drawn!r}: a valid document was refused: {message}")
            else:
                problem = names_field_and_value(drawn, message)
                if problem:
                    outcomes.problems.append(f"{drawn!r}: {problem}: {message[:400]}")
        if not fuzz_operator.running():
            outcomes.problems.append(f"after {drawn!r} the operator had exited")
        elif counter[0] % CHECK_EVERY == 0:
            outcomes.problems += _check(fuzz_operator, sampler, admission, pods, reported)

    try:
        one()
        # The operator has seen every document: it settles, alive and without a traceback.
        holds("the operator alive", fuzz_operator.running, seconds=5)
        outcomes.problems += _check(fuzz_operator, sampler, admission, pods, reported)
        print(
            f"\nFUZZ {counter[0]} documents: {outcomes.accepted} accepted, {outcomes.refused} refused, "
            f"{len(outcomes.problems)} problems"
        )
        assert not outcomes.problems, "\n".join(outcomes.problems[:30])
    finally:
        record.close()
        api.close()
        delete_cluster_scoped(control_plane, prefix)


def _version(drawn: Case) -> str:
    return "v1" if drawn.group == "ray.io" else "v1alpha1"


def _message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body).get("message", exc.body))
    except (TypeError, ValueError):
        return str(exc.body or exc.reason)


def _check(
    operator: OperatorProcess, sampler: GateSampler, admission: Any, pods: set[str], reported: set[str]
) -> list[str]:
    """What went wrong since the last check: new tracebacks, the admitted RayJob changed."""
    problems = [f"the operator logged:\n{t}" for t in operator.tracebacks() if t not in reported]
    reported.update(operator.tracebacks())
    if _sentinel_admission(sampler) != admission:
        problems.append("the admitted RayJob's admission changed")
    if {n for n in sampler.current("Pod") if n.startswith("sentinel-")} != pods:
        problems.append("the admitted RayJob's pods changed")
    return problems
