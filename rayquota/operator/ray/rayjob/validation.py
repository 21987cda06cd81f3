"""KubeRay's RayJob validation rules (the ones a CRD schema cannot express)."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

import yaml

from rayquota.api.ray_v1 import (
    DELETE_WORKERS_RULE_WITH_AUTOSCALING,
    DELETE_WORKERS_WITH_AUTOSCALING,
    DeletionPolicyType,
    JobSubmissionMode,
)
from rayquota.operator.ray.raycluster.feature_validation import feature_errors
from rayquota.operator.ray.vocabulary.labels import submission_mode

MAX_RAYJOB_NAME = 47  # the cluster and submitter names add suffixes; 63 is the label limit
MODES = tuple(mode.value for mode in JobSubmissionMode)
CLUSTER_POLICIES = ("DeleteCluster", "DeleteWorkers")


def validate_rayjob(rayjob: Mapping[str, Any], allowed: Collection[str] = ()) -> list[str]:
    """``allowed``: gated RayCluster fields whose feature gate is on."""
    errors: list[str] = []
    meta = rayjob["metadata"]
    spec = rayjob.get("spec") or {}
    mode = submission_mode(rayjob)
    selector = spec.get("clusterSelector") or {}
    cluster_spec = spec.get("rayClusterSpec")
    deletion = spec.get("deletionStrategy")

    if len(meta["name"]) > MAX_RAYJOB_NAME:
        errors.append(f"metadata.name must be at most {MAX_RAYJOB_NAME} characters")
    if mode not in MODES:
        errors.append(f"spec.submissionMode {mode!r} is not one of {', '.join(MODES)}")
    if not selector and not cluster_spec:
        errors.append("one of spec.rayClusterSpec or spec.clusterSelector must be set")
    if selector and cluster_spec:
        errors.append("spec.rayClusterSpec and spec.clusterSelector cannot both be set")
    if spec.get("suspend") and not spec.get("shutdownAfterJobFinishes"):
        errors.append("a RayJob with spec.suspend must set spec.shutdownAfterJobFinishes: true")
    if selector:
        if spec.get("suspend"):
            errors.append("spec.suspend cannot be used with spec.clusterSelector")
        if int(spec.get("backoffLimit") or 0) > 0:
            errors.append(
                "spec.backoffLimit cannot be used with spec.clusterSelector (the cluster is not ours)"
            )
        if spec.get("shutdownAfterJobFinishes"):
            errors.append("spec.shutdownAfterJobFinishes cannot be used with spec.clusterSelector")
        if mode == "SidecarMode":
            errors.append("SidecarMode needs spec.rayClusterSpec, not spec.clusterSelector")
    if mode != "InteractiveMode" and not spec.get("entrypoint"):
        errors.append(f"spec.entrypoint is required in {mode}")
    if spec.get("submitterPodTemplate") and mode != "K8sJobMode":
        errors.append("spec.submitterPodTemplate is only used in K8sJobMode")
    if cluster_spec and (cluster_spec.get("upgradeStrategy") or {}).get("type") is not None:
        errors.append(
            "spec.rayClusterSpec.upgradeStrategy is not allowed: a RayJob's cluster is never upgraded"
        )
    if int(spec.get("ttlSecondsAfterFinished") or 0) > 0 and not spec.get("shutdownAfterJobFinishes"):
        errors.append(
            "spec.ttlSecondsAfterFinished needs spec.shutdownAfterJobFinishes: true "
            "(it is how long the cluster outlives the job)"
        )
    if deletion:
        legacy = [when for when in ("onSuccess", "onFailure") if deletion.get(when) is not None]
        if len(legacy) == 1:
            errors.append(
                "spec.deletionStrategy needs both onSuccess and onFailure when either is set "
                f"(only {legacy[0]} is)"
            )
        errors += _deletion_with_shutdown_errors(spec, deletion)
        policies = [r.get("policy") for r in deletion.get("deletionRules") or []]
        policies += [(deletion.get(k) or {}).get("policy") for k in ("onSuccess", "onFailure")]
        if selector and any(p in CLUSTER_POLICIES for p in policies):
            errors.append("spec.deletionStrategy cannot delete a cluster chosen by spec.clusterSelector")
        if (cluster_spec or {}).get("enableInTreeAutoscaling"):
            errors += delete_workers_errors(deletion)
    if cluster_spec:
        errors += feature_errors(
            cluster_spec,
            meta.get("annotations") or {},
            "spec.rayClusterSpec",
            owner_kind="RayJob",
            allowed=allowed,
        )
    if spec.get("runtimeEnvYAML"):
        try:
            if not isinstance(yaml.safe_load(spec["runtimeEnvYAML"]), dict):
                errors.append("spec.runtimeEnvYAML must be a YAML mapping")
        except yaml.YAMLError as exc:
            errors.append(f"spec.runtimeEnvYAML is not valid YAML: {exc}")
    if spec.get("entrypointResources"):
        try:
            if not isinstance(json.loads(spec["entrypointResources"]), dict):
                errors.append("spec.entrypointResources must be a JSON object")
        except ValueError as exc:
            errors.append(f"spec.entrypointResources is not valid JSON: {exc}")
    return errors


def _deletion_with_shutdown_errors(spec: Mapping[str, Any], deletion: Mapping[str, Any]) -> list[str]:
    """KubeRay's rules for deletionStrategy beside shutdownAfterJobFinishes: deletionRules exclude
    it; the legacy onSuccess/onFailure may go with it (they take precedence once the job ends),
    but not with a DeleteNone policy, which would contradict it."""
    if not spec.get("shutdownAfterJobFinishes"):
        return []
    if deletion.get("deletionRules"):
        return ["spec.deletionStrategy.deletionRules and spec.shutdownAfterJobFinishes cannot both be set"]
    return [
        f"spec.deletionStrategy.{when}.policy is DeleteNone but spec.shutdownAfterJobFinishes is true"
        for when in ("onSuccess", "onFailure")
        if (deletion.get(when) or {}).get("policy") == DeletionPolicyType.DELETE_NONE
    ]


def delete_workers_errors(deletion: Mapping[str, Any]) -> list[str]:
    """DeleteWorkers on a cluster with autoscaling: the field and KubeRay's reason."""
    errors = [
        f"spec.deletionStrategy.deletionRules[{i}]: {DELETE_WORKERS_RULE_WITH_AUTOSCALING}"
        for i, rule in enumerate(deletion.get("deletionRules") or [])
        if rule.get("policy") == DeletionPolicyType.DELETE_WORKERS
    ]
    for when in ("onSuccess", "onFailure"):
        if (deletion.get(when) or {}).get("policy") == DeletionPolicyType.DELETE_WORKERS:
            errors.append(f"spec.deletionStrategy.{when}.policy: {DELETE_WORKERS_WITH_AUTOSCALING}")
    return errors
