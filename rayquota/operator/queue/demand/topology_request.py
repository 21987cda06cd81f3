"""Kueue's topology annotations on a pod template, read into the engine's TopologyRequest.

Pure: one place that knows the annotations, called wherever pod-set demands are built
(a RayCluster's head and worker groups, a RayJob's submitter, a batch/v1 Job's template):

- ``kueue.x-k8s.io/podset-required-topology: <node label>``: all pods in one domain of that level;
- ``kueue.x-k8s.io/podset-preferred-topology: <node label>``: one domain if possible, else higher;
- ``kueue.x-k8s.io/podset-unconstrained-topology: "true"``: anywhere there is room;
- ``kueue.x-k8s.io/podset-slice-required-topology: <node label>`` with
  ``kueue.x-k8s.io/podset-slice-size: <n>``: each slice of n pods in one domain of that level
  (for a multi-host worker group the size defaults to its ``numOfHosts``);
- ``kueue.x-k8s.io/podset-group-name: <name>``: pod sets placed in one domain together.

A bad value is a :class:`TopologyAnnotationError` naming the annotation and the value; the
webhook refuses the object with it, and a Workload built anyway waits with it as its reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.queueing import TopologyMode, TopologyRequest

PREFIX = "kueue.x-k8s.io/"
REQUIRED = PREFIX + "podset-required-topology"
PREFERRED = PREFIX + "podset-preferred-topology"
UNCONSTRAINED = PREFIX + "podset-unconstrained-topology"
SLICE_REQUIRED = PREFIX + "podset-slice-required-topology"
SLICE_SIZE = PREFIX + "podset-slice-size"
GROUP_NAME = PREFIX + "podset-group-name"
ANNOTATIONS = (REQUIRED, PREFERRED, UNCONSTRAINED, SLICE_REQUIRED, SLICE_SIZE, GROUP_NAME)
MAX_LABEL = 316


class TopologyAnnotationError(ValueError):
    """A topology annotation Kueue would refuse; the message names it and its value."""


def _annotations(template: Mapping[str, Any]) -> Mapping[str, Any]:
    return (template.get("metadata") or {}).get("annotations") or {}


def has_topology_annotations(template: Mapping[str, Any]) -> bool:
    annotations = _annotations(template)
    return any(a in annotations for a in ANNOTATIONS)


def _level(annotations: Mapping[str, Any], key: str, where: str) -> str | None:
    value = annotations.get(key)
    if value is None:
        return None
    text = str(value).strip()
    if not text or len(text) > MAX_LABEL or any(c.isspace() for c in text):
        raise TopologyAnnotationError(f"{where}: annotation {key}: {value!r} is not a node label")
    return text


def read(template: Mapping[str, Any], where: str, hosts: int = 1) -> TopologyRequest | None:
    """The pod template's topology request (``None``: no topology annotation).

    ``where`` names the template in errors (``spec.workerGroupSpecs[0].template``); ``hosts``
    is a multi-host worker group's ``numOfHosts``, the default slice size.
    """
    annotations = _annotations(template)
    if not any(a in annotations for a in ANNOTATIONS):
        return None
    required = _level(annotations, REQUIRED, where)
    preferred = _level(annotations, PREFERRED, where)
    raw_unconstrained = annotations.get(UNCONSTRAINED)
    if raw_unconstrained is not None and str(raw_unconstrained).lower() not in ("true", "false"):
        raise TopologyAnnotationError(
            f"{where}: annotation {UNCONSTRAINED}: {raw_unconstrained!r} is not true or false"
        )
    unconstrained = str(raw_unconstrained).lower() == "true"
    chosen = [
        k for k, v in ((REQUIRED, required), (PREFERRED, preferred), (UNCONSTRAINED, unconstrained)) if v
    ]
    if len(chosen) > 1:
        raise TopologyAnnotationError(f"{where}: annotations {' and '.join(chosen)} exclude each other")
    slice_level = _level(annotations, SLICE_REQUIRED, where)
    raw_size = annotations.get(SLICE_SIZE)
    slice_size = 1
    if raw_size is not None:
        try:
            slice_size = int(str(raw_size))
        except ValueError:
            slice_size = 0
        if slice_size < 1:
            raise TopologyAnnotationError(
                f"{where}: annotation {SLICE_SIZE}: {raw_size!r} is not a positive integer"
            )
        if slice_level is None:
            raise TopologyAnnotationError(f"{where}: annotation {SLICE_SIZE} needs {SLICE_REQUIRED}")
    elif slice_level is not None:
        if hosts < 2:
            raise TopologyAnnotationError(f"{where}: annotation {SLICE_REQUIRED} needs {SLICE_SIZE}")
        slice_size = hosts  # a multi-host replica is a natural slice
    group = annotations.get(GROUP_NAME)
    group_name = str(group).strip() if group is not None else None
    if group is not None and not group_name:
        raise TopologyAnnotationError(f"{where}: annotation {GROUP_NAME}: {group!r} is empty")
    if required is not None:
        mode, level = TopologyMode.REQUIRED, required
    elif preferred is not None:
        mode, level = TopologyMode.PREFERRED, preferred
    else:
        mode, level = TopologyMode.UNCONSTRAINED, None
    return TopologyRequest(mode, level, slice_level, slice_size, group_name)


def errors(template: Mapping[str, Any], where: str, hosts: int = 1) -> list[str]:
    """What is wrong with the template's topology annotations (for the webhook)."""
    try:
        read(template, where, hosts)
    except TopologyAnnotationError as exc:
        return [str(exc)]
    return []


# --- the Workload API's topologyRequest (Kueue's PodSetTopologyRequest) ---------------------


def to_api(request: TopologyRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if request.mode is TopologyMode.REQUIRED:
        out["required"] = request.level
    elif request.mode is TopologyMode.PREFERRED:
        out["preferred"] = request.level
    elif request.slice_level is None:
        out["unconstrained"] = True
    if request.slice_level is not None:
        out["podSetSliceRequiredTopology"] = request.slice_level
        out["podSetSliceSize"] = request.slice_size
    if request.group is not None:
        out["podSetGroupName"] = request.group
    return out


def from_api(raw: Mapping[str, Any] | None) -> TopologyRequest | None:
    """A Workload's ``podSets[].topologyRequest`` (both API groups spell it the same)."""
    if not raw:
        return None
    slice_level = raw.get("podSetSliceRequiredTopology")
    slice_size = int(raw.get("podSetSliceSize") or 1)
    group = raw.get("podSetGroupName")
    if raw.get("required"):
        mode, level = TopologyMode.REQUIRED, str(raw["required"])
    elif raw.get("preferred"):
        mode, level = TopologyMode.PREFERRED, str(raw["preferred"])
    else:
        mode, level = TopologyMode.UNCONSTRAINED, None
    return TopologyRequest(
        mode, level, str(slice_level) if slice_level else None, slice_size, str(group) if group else None
    )
