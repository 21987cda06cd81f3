"""A RayJob under quota beside KubeRay's own operator (admission-only mode).

Gated like any RayJob (its ``spec.suspend``, which KubeRay honours and never writes), with one
difference: a ``submitterPodTemplate`` the user did not write is never created to carry the
flavor's placement. KubeRay takes a present template as the whole submitter pod (it builds
its default only when the field is absent) and fails on one without containers. Such a
submitter pod runs where the scheduler puts it (see docs/install.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rayquota.operator.queue.adapters.protocol import Body, Edit
from rayquota.operator.queue.adapters.rayjob import RayJobAdapter
from rayquota.operator.queue.driver import AdmittedSlice
from rayquota.queueing import ResourceFlavor


class BesideKubeRayJobAdapter(RayJobAdapter):
    def run_with(
        self,
        obj: Body,
        children: Sequence[Body],
        admission: AdmittedSlice,
        flavors: Mapping[str, ResourceFlavor],
    ) -> list[Edit]:
        edits = super().run_with(obj, children, admission, flavors)
        if "submitterPodTemplate" in (obj.get("spec") or {}):
            return edits
        out: list[Edit] = []
        for edit in edits:
            if edit.kind == self.kind:
                edit.body["spec"].pop("submitterPodTemplate", None)
                if edit.body == obj:
                    continue
            out.append(edit)
        return out
