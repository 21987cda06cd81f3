"""The webhook configurations the loopback server registers for itself.

They name ``https://127.0.0.1:PORT/...`` with the generated CA in ``caBundle``: right for the
local control plane, whose API server runs on the same host. ``failurePolicy: Ignore`` and
object selectors on the queue labels keep a stopped operator from blocking anything; the
operator deletes them when it stops, and a newer registration (another operator's) is never
deleted by an older one. The Helm chart ships its own configurations for its Service.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from rayquota.operator.core.resources import Resource
from rayquota.operator.kube import ApiError, Conflict, KubeClient, NotFound
from rayquota.operator.queue.adapters import ADAPTERS, child_markers
from rayquota.operator.queue.adapters.job_labels import JOB_NAME_LABEL
from rayquota.operator.ray.vocabulary import labels

log = logging.getLogger(__name__)

MUTATING = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)
VALIDATING = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
CONFIG_NAME = "rayquota-queue"
# How long the API server waits for an answer (the chart's webhooks.timeoutSeconds is the same):
# a review takes milliseconds, but it is answered by the operator's one event loop, between the
# steps of its reconciles, on whatever CPU the node leaves it; 5 s timed out on a loaded test
# machine (the API server's call at load 30 on 2 cores). Kueue's chart uses 10; the API server
# allows at most 30.
TIMEOUT_SECONDS = 10
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def _rule(group: str, plurals: tuple[str, ...], operations: list[str]) -> dict[str, Any]:
    return {
        "apiGroups": [group],
        "apiVersions": ["*"],
        "resources": list(plurals),
        "operations": operations,
        "scope": "*",
    }


def queued_kind_rules(operations: list[str]) -> list[dict[str, Any]]:
    """One rule per API group of the registered kinds (adapters.ADAPTERS)."""
    by_group: dict[str, list[str]] = {}
    for adapter in ADAPTERS.values():
        by_group.setdefault(adapter.resource.group, []).append(adapter.resource.plural)
    return [_rule(group, tuple(plurals), operations) for group, plurals in by_group.items()]


def pod_gate_hook(url: str, ca_bundle: str) -> dict[str, Any]:
    """Admission-only mode: the pods of Ray clusters (KubeRay's label), each created behind the
    scheduling gate when its cluster's pods are held. ``Fail``: a pod the webhook could not see
    would start without its quota; the registration goes when the operator stops."""
    return {
        "name": "pod-gate.queue.rayquota.io",
        "clientConfig": {"url": f"{url}/mutate-pod", "caBundle": ca_bundle},
        "rules": [_rule("", ("pods",), ["CREATE"])],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": TIMEOUT_SECONDS,
        "objectSelector": {"matchExpressions": [{"key": labels.RAY_CLUSTER, "operator": "Exists"}]},
    }


# Namespaces whose Job pods are never a queued object's (the control plane's own).
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")


def job_pod_gate_hook(url: str, ca_bundle: str) -> dict[str, Any]:
    """Admission-only mode: the pods of batch/v1 Jobs (the Job controller's label), a queued
    RayJob's submitter pod created behind the scheduling gate (KubeRay's operator writes its
    template, so the gate cannot be put there). Only pods of Jobs are sent, none of the system
    namespaces'; the webhook lets every other Job's pods through untouched. ``Fail``, as the Ray
    pods' hook: a submitter the webhook could not see would run off its domain."""
    return {
        **pod_gate_hook(url, ca_bundle),
        "name": "job-pod-gate.queue.rayquota.io",
        "objectSelector": {"matchExpressions": [{"key": JOB_NAME_LABEL, "operator": "Exists"}]},
        "namespaceSelector": {
            "matchExpressions": [
                {"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": list(SYSTEM_NAMESPACES)}
            ]
        },
    }


def pod_gate_kept_hook(url: str, ca_bundle: str) -> dict[str, Any]:
    """Admission-only mode: an UPDATE that removes the scheduling gate from a Ray cluster's pod
    is refused unless the admission covers the pod (a gate cannot be added back). ``Fail``, as
    the gate's own webhook."""
    return {
        **pod_gate_hook(url, ca_bundle),
        "name": "pod-gate-kept.queue.rayquota.io",
        "clientConfig": {"url": f"{url}/validate-pod", "caBundle": ca_bundle},
        "rules": [_rule("", ("pods",), ["UPDATE"])],
    }


def webhook_configurations(
    url: str, ca_bundle: str, queue_label_keys: tuple[str, ...], hold_pods: bool = False
) -> tuple[dict[str, Any], ...]:
    """One webhook per queue label key (a selector cannot OR two keys), plus one for the
    children of the kinds that mark theirs (RayJobs', RayServices'), which may not carry the
    label; the ClusterQueues' and the Cohorts' (each also as a mutating webhook, which answers
    before the CRD schema: a quota that is not a quantity is refused in words); with
    ``hold_pods`` (admission-only mode) the pod gates' too (Ray clusters' pods, Jobs' pods)."""

    def hook(
        name: str, path: str, rules: list[dict[str, Any]], selector: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": name,
            "clientConfig": {"url": f"{url}{path}", "caBundle": ca_bundle},
            "rules": rules,
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": TIMEOUT_SECONDS,
        }
        if selector is not None:
            out["objectSelector"] = selector
        return out

    labelled: list[Mapping[str, Any]] = [
        {"matchExpressions": [{"key": key, "operator": "Exists"}]} for key in queue_label_keys
    ]
    children: Mapping[str, Any] = {
        "matchExpressions": [
            {"key": key, "operator": "In", "values": values} for key, values in child_markers().items()
        ]
    }
    cluster_queue_rules = [_rule("rayquota.io", ("clusterqueues",), ["CREATE", "UPDATE"])]
    cohort_rules = [_rule("rayquota.io", ("cohorts",), ["CREATE", "UPDATE"])]
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": CONFIG_NAME},
        "webhooks": [
            *(
                # CREATE: born suspended; UPDATE: a gate the new body leaves out is carried over.
                hook(
                    f"born-suspended-{i}.queue.rayquota.io",
                    "/mutate-ray",
                    queued_kind_rules(["CREATE", "UPDATE"]),
                    sel,
                )
                for i, sel in enumerate(labelled)
            ),
            # Refusals in words before the CRD schema's (mutating webhooks are called first).
            hook("clusterqueue-words.queue.rayquota.io", "/mutate-clusterqueue", cluster_queue_rules, None),
            hook("cohort-words.queue.rayquota.io", "/mutate-cohort", cohort_rules, None),
            *([pod_gate_hook(url, ca_bundle), job_pod_gate_hook(url, ca_bundle)] if hold_pods else []),
        ],
    }
    gate_hooks = [
        hook(f"gate-{i}.queue.rayquota.io", "/validate-ray", queued_kind_rules(["UPDATE"]), sel)
        for i, sel in enumerate([*labelled, children])
    ]
    queue_hook = hook(
        "clusterqueue.queue.rayquota.io",
        "/validate-clusterqueue",
        cluster_queue_rules,
        None,
    )
    cohort_hook = hook("cohort.queue.rayquota.io", "/validate-cohort", cohort_rules, None)
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIG_NAME},
        "webhooks": [
            *gate_hooks,
            queue_hook,
            cohort_hook,
            *([pod_gate_kept_hook(url, ca_bundle)] if hold_pods else []),
        ],
    }
    return mutating, validating


class LoopbackRegistration:
    """Registers the configurations for this process's server; removes exactly those again."""

    def __init__(
        self, client: KubeClient, queue_label_keys: tuple[str, ...], ca_bundle: str, hold_pods: bool = False
    ) -> None:
        self.client = client
        self.queue_label_keys = queue_label_keys
        self.ca_bundle = ca_bundle
        self.hold_pods = hold_pods
        self._written: dict[Resource, str] = {}  # resourceVersion of what this process wrote

    async def register(self, url: str) -> None:
        configurations = webhook_configurations(url, self.ca_bundle, self.queue_label_keys, self.hold_pods)
        for config, resource in zip(configurations, (MUTATING, VALIDATING), strict=True):
            existing = await self.client.get(resource.path(name=CONFIG_NAME))
            if existing is None:
                written = await self.client.create(resource.path(), config)
            else:
                config["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
                written = await self.client.replace(resource.path(name=CONFIG_NAME), config)
            self._written[resource] = str(written["metadata"]["resourceVersion"])

    async def unregister(self) -> None:
        """Delete what this process registered, unless someone has registered since."""
        for resource, version in self._written.items():
            body = {
                "kind": "DeleteOptions",
                "apiVersion": "v1",
                "preconditions": {"resourceVersion": version},
            }
            try:
                await self.client.request("DELETE", resource.path(name=CONFIG_NAME), body=body)
                log.info("%s %s removed", resource.kind, CONFIG_NAME)
            except Conflict:
                log.info(
                    "%s %s left in place: another operator registered it since", resource.kind, CONFIG_NAME
                )
            except (ApiError, NotFound) as exc:
                log.debug("%s %s not deleted: %s", resource.kind, CONFIG_NAME, exc)
        self._written.clear()
