"""Kueue `Configuration` keys rayquota reads but does not implement: each is refused by name when
it asks for a behaviour rayquota lacks (fail closed), or accepted with a warning when ignoring it
changes nothing a user relies on (client tuning, Kueue's own feature gates, diagnostics)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from rayquota.config.model import Configuration
from rayquota.queueing.quota.fairsharing import FairSharing

KUEUE_FRAMEWORKS_QUEUED = (
    "batch/job",
    "ray.io/rayjob",
    "ray.io/raycluster",
    "ray.io/rayservice",
    "jobset.x-k8s.io/jobset",
)


@dataclass(frozen=True)
class Verdict:
    refusals: list[str]
    warnings: list[str]


Check = Callable[[Configuration, Verdict], None]


def _as_written(value: Any) -> Any:
    """A key's value as the file gave it (the keys it set, Kueue's text), for a message."""
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_unset=True)
    if isinstance(value, list):
        return [_as_written(item) for item in value]
    return value


def _refused_sections(config: Configuration, verdict: Verdict) -> None:
    reasons = {
        "objectRetentionPolicies": "rayquota deletes a Workload only with the object it stands for",
        "tls": "rayquota's servers do not take TLS options; it would not get the security it asks for",
    }
    for key, reason in reasons.items():
        if (value := getattr(config, key)) is not None:
            verdict.refusals.append(f"{key}: {_as_written(value)!r} not supported ({reason})")
    for key in ("excludeResourcePrefixes", "quotaCheckStrategy", "transformations"):
        if config.resources is not None and (value := getattr(config.resources, key)) is not None:
            verdict.refusals.append(
                f"resources.{key}: {_as_written(value)!r} not supported (rayquota counts resources as pods "
                "request them; of Kueue's resources only deviceClassMappings is honoured)"
            )
    if config.metrics.customLabels:
        verdict.refusals.append(
            f"metrics.customLabels: {_as_written(config.metrics.customLabels)!r} not supported "
            "(rayquota adds no custom labels to its metrics)"
        )


def _multikueue(config: Configuration, verdict: Verdict) -> None:
    section = config.multiKueue
    if section is None:
        return
    refused = {
        "externalFrameworks": (section.externalFrameworks, "rayquota dispatches only the kinds it queues"),
        "clusterProfile": (
            section.clusterProfile,
            "rayquota reads the workers' credentials from kubeconfig Secrets, not the ClusterProfile API",
        ),
    }
    for key, (value, reason) in refused.items():
        if written := _as_written(value):
            verdict.refusals.append(f"multiKueue.{key}: {written!r} not supported ({reason})")


def _fair_sharing(config: Configuration, verdict: Verdict) -> None:
    fair = config.fairSharing
    if fair is None:
        return
    try:
        FairSharing.parse(fair.preemptionStrategies)
    except ValueError as error:
        verdict.refusals.append(f"fairSharing.preemptionStrategies: {fair.preemptionStrategies}: {error}")


def _namespace_selector(config: Configuration, verdict: Verdict) -> None:
    if config.managedJobsNamespaceSelector is None:
        return
    if config.manageJobsWithoutQueueName:
        verdict.refusals.append(
            f"managedJobsNamespaceSelector: {_as_written(config.managedJobsNamespaceSelector)!r} "
            "not supported with manageJobsWithoutQueueName: true "
            "(rayquota would queue unlabelled objects in every namespace)"
        )
    else:
        verdict.warnings.append(
            "managedJobsNamespaceSelector: ignored (it only narrows manageJobsWithoutQueueName, which is off)"
        )


def _frameworks(config: Configuration, verdict: Verdict) -> None:
    integrations = config.integrations
    if integrations is None:
        return
    others = [f for f in integrations.frameworks or [] if f not in KUEUE_FRAMEWORKS_QUEUED]
    if others:
        verdict.warnings.append(
            f"integrations.frameworks: {', '.join(others)} not queued by rayquota "
            f"(it queues {', '.join(KUEUE_FRAMEWORKS_QUEUED)})"
        )
    if integrations.externalFrameworks:
        verdict.refusals.append(
            f"integrations.externalFrameworks: {integrations.externalFrameworks} not supported "
            "(rayquota has no external framework integration)"
        )
    if integrations.labelKeysToCopy:
        verdict.refusals.append(
            f"integrations.labelKeysToCopy: {integrations.labelKeysToCopy} not supported "
            "(rayquota copies no labels onto Workloads)"
        )


def _ignored(config: Configuration, verdict: Verdict) -> None:
    harmless = {
        "clientConnection": config.clientConnection,
        "featureGates": config.featureGates,
        "pprofBindAddress": config.pprofBindAddress,
        "visibilityServer": config.visibilityServer,
        "controller.groupKindConcurrency": config.controller.groupKindConcurrency,
        "controller.cacheSyncTimeout": config.controller.cacheSyncTimeout,
    }
    for key, value in harmless.items():
        if value is not None:
            verdict.warnings.append(f"{key}: {_as_written(value)!r}: Kueue's setting, ignored by rayquota")
    if config.metrics.enableClusterQueueResources:
        verdict.warnings.append("metrics.enableClusterQueueResources: Kueue's setting, ignored by rayquota")
    local = config.metrics.localQueueMetrics
    if local is not None and (not local.enable or local.localQueueSelector is not None):
        verdict.warnings.append(
            f"metrics.localQueueMetrics: {local.model_dump(exclude_none=True)!r} ignored "
            "(rayquota serves the metrics of every LocalQueue)"
        )
    internal = config.internalCertManagement
    if internal is not None and internal.webhookServiceName is not None:
        verdict.warnings.append(
            "internalCertManagement.webhookServiceName: ignored "
            "(the certificate covers internalCertManagement.hosts)"
        )


CHECKS: tuple[Check, ...] = (
    _refused_sections,
    _multikueue,
    _fair_sharing,
    _namespace_selector,
    _frameworks,
    _ignored,
)


def judge(config: Configuration) -> Verdict:
    verdict = Verdict([], [])
    for check in CHECKS:
        check(config, verdict)
    return verdict
