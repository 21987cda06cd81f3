"""KubeRay v1.7.0's operator feature gates, as rayquota reads them.

A KubeRay user's settings (the Helm chart's `featureGates`, the operator's `--feature-gates`)
apply unchanged where rayquota can honour them, and are refused with the gate's name where it
cannot: a gate for a feature rayquota always has cannot be turned off, a gate for a feature it
does not implement cannot be turned on. The Helm chart refuses the same settings at install
(`templates/_feature_gates.tpl`; a test renders the chart with every gate against this table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum


class GateSupport(Enum):
    ALWAYS_ON = "always on"  # rayquota has the feature; `false` is refused
    SWITCH = "switch"  # rayquota honours either value
    NOT_IMPLEMENTED = "not implemented"  # `true` is refused


@dataclass(frozen=True)
class KubeRayGate:
    support: GateSupport
    kuberay_default: bool
    what: str


KUBERAY_GATES: Mapping[str, KubeRayGate] = {
    "RayClusterStatusConditions": KubeRayGate(GateSupport.ALWAYS_ON, True, "RayCluster status conditions"),
    "RayJobDeletionPolicy": KubeRayGate(GateSupport.ALWAYS_ON, True, "RayJob spec.deletionStrategy"),
    "RayMultiHostIndexing": KubeRayGate(GateSupport.ALWAYS_ON, True, "multi-host worker indexing labels"),
    "RayServiceIncrementalUpgrade": KubeRayGate(
        GateSupport.ALWAYS_ON, True, "RayService NewClusterWithIncrementalUpgrade"
    ),
    "RayCronJob": KubeRayGate(GateSupport.SWITCH, False, "the RayCronJob controller"),
    "SidecarSubmitterRestart": KubeRayGate(
        GateSupport.NOT_IMPLEMENTED, False, "per-container restart of the SidecarMode submitter"
    ),
    "RayClusterNetworkPolicy": KubeRayGate(GateSupport.SWITCH, False, "RayCluster spec.networkPolicy"),
    "GCSFaultToleranceEmbeddedStorage": KubeRayGate(
        GateSupport.NOT_IMPLEMENTED, False, "GCS fault tolerance on embedded RocksDB"
    ),
    "RayClusterMTLS": KubeRayGate(GateSupport.NOT_IMPLEMENTED, False, "RayCluster spec.tlsOptions (mTLS)"),
    "RayClusterHistoryServer": KubeRayGate(
        GateSupport.NOT_IMPLEMENTED, False, "the history server collector sidecar"
    ),
    "KubernetesWAS": KubeRayGate(
        GateSupport.NOT_IMPLEMENTED, False, "the Workload-Aware Scheduling scheduler"
    ),
}

# Where KubeRay's default is off, rayquota's differs only for the switches it implements.
RAYQUOTA_DEFAULTS: Mapping[str, bool] = {"RayCronJob": True}


def refusal(name: str, enabled: bool) -> str | None:
    """Why rayquota cannot run with gate `name` set to `enabled`, or None when it can."""
    gate = KUBERAY_GATES.get(name)
    if gate is None:
        return f"unknown feature gate {name!r} (KubeRay v1.7.0 has {', '.join(sorted(KUBERAY_GATES))})"
    if gate.support is GateSupport.ALWAYS_ON and not enabled:
        return f"feature gate {name}=false: rayquota always runs {gate.what} and cannot turn it off"
    if gate.support is GateSupport.NOT_IMPLEMENTED and enabled:
        return f"feature gate {name}=true: rayquota does not implement {gate.what}"
    return None


@dataclass(frozen=True)
class FeatureGates:
    """The gates set explicitly; the others take rayquota's default."""

    explicit: Mapping[str, bool] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> FeatureGates:
        """KubeRay's `--feature-gates` syntax: `Name=true,Other=false`. ValueError names the first
        gate rayquota cannot honour."""
        explicit: dict[str, bool] = {}
        for item in (part.strip() for part in text.split(",")):
            if not item:
                continue
            name, sep, raw = item.partition("=")
            value = raw.strip().lower()
            if not sep or value not in ("true", "false"):
                raise ValueError(f"feature gate {item!r}: expected Name=true or Name=false")
            enabled = value == "true"
            reason = refusal(name.strip(), enabled)
            if reason is not None:
                raise ValueError(reason)
            explicit[name.strip()] = enabled
        return cls(explicit)

    def enabled(self, name: str) -> bool:
        if name in self.explicit:
            return self.explicit[name]
        gate = KUBERAY_GATES[name]
        return RAYQUOTA_DEFAULTS.get(name, gate.support is GateSupport.ALWAYS_ON)
