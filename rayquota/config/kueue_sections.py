"""Kueue's `Configuration` keys that rayquota reads but does not implement, typed as Kueue v0.19.2
types them (`apis/config/v1beta2`): a value of the wrong shape is refused as one, naming the key
and the value, and one of the right shape reaches `kueue_keys`, which refuses it by name (or warns
when ignoring it changes nothing a user relies on). Every field is optional where Kueue's is, and
unset is ``None``; durations keep Kueue's text ("1h30m"), so a refusal quotes what was written."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from rayquota.config.section import Port, Section
from rayquota.operator.ray.raycronjob.schedule import ScheduleError, go_duration_seconds


def _go_duration_text(text: str) -> str:
    try:
        go_duration_seconds(text.strip())
    except ScheduleError:
        raise ValueError(f"expected a duration such as 90s, 5m or 1h30m, got {text!r}") from None
    return text


GoDuration = Annotated[str, AfterValidator(_go_duration_text)]
Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]


class LabelSelectorRequirement(Section):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = None


class LabelSelector(Section):
    """Kubernetes' metav1.LabelSelector."""

    matchLabels: dict[str, str] | None = None
    matchExpressions: list[LabelSelectorRequirement] | None = None


class CustomLabel(Section):
    """Kueue's metrics.customLabels[] (a label or annotation promoted to a metric label)."""

    name: str
    sourceLabelKey: str | None = None
    sourceAnnotationKey: str | None = None
    sourceKind: Literal["Cohort", "LocalQueue", "ClusterQueue", "Workload"] | None = None
    trackedValues: list[str] | None = None


class ExternalFramework(Section):
    """Kueue's multiKueue.externalFrameworks[]: a kind's `kind.version.group`."""

    name: str


class ExecEnvVar(Section):
    name: str
    value: str


class ExecConfig(Section):
    """client-go's exec credential plugin stanza (as in a kubeconfig's `user.exec`)."""

    command: str
    args: list[str] | None = None
    env: list[ExecEnvVar] | None = None
    apiVersion: str | None = None
    installHint: str | None = None
    provideClusterInfo: bool | None = None
    interactiveMode: Literal["Never", "IfAvailable", "Always"] | None = None


class ClusterProfileProvider(Section):
    """Kueue's ClusterProfileAccessProvider (its deprecated CredentialsProvider is the same)."""

    name: str
    execConfig: ExecConfig


class ClusterProfile(Section):
    """Kueue's multiKueue.clusterProfile: the workers' credentials through the ClusterProfile API."""

    accessProviders: list[ClusterProfileProvider] | None = None
    credentialsProviders: list[ClusterProfileProvider] | None = None


class ResourceTransformation(Section):
    """Kueue's resources.transformations[]: an input resource counted as other resources."""

    input: str
    strategy: Literal["Retain", "Replace"] | None = None
    multiplyBy: str | None = None
    outputs: dict[str, str | int | float] | None = None


class WorkloadRetentionPolicy(Section):
    afterFinished: GoDuration | None = None
    afterDeactivatedByKueue: GoDuration | None = None


class ObjectRetentionPolicies(Section):
    """Kueue's objectRetentionPolicies: when Workloads are deleted."""

    workloads: WorkloadRetentionPolicy | None = None


class VisibilityServer(Section):
    """Kueue's visibilityServer: where Kueue's own visibility server listens."""

    bindAddress: str | None = None
    bindPort: Port | None = None


class TlsOptions(Section):
    """Kueue's tls: the TLS versions, cipher suites and curves of Kueue's servers."""

    minVersion: str | None = None
    cipherSuites: list[str] | None = None
    curvePreferences: list[Int32] | None = None
