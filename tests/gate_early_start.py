"""The Jobs and pods of a JobSet written unsuspended without the webhook that started before the
queue's gate could hold them.

No webhook can set the JobSet's ``spec.suspend`` before JobSet's controller reads it, and that
controller creates the Jobs at once, as unsuspended (and unplaced) as the JobSet it read, even
after the queue has written the JobSet since; the Job controller starts their pods. The queue
then suspends the JobSet, its controller suspends the Jobs and the Job controller deletes those
pods (docs/operations.md: without the webhook, create queued JobSets suspended). A test of that
path judges every other state strictly: :class:`EarlyStart` says which versions belong to that
start (a Job created unsuspended before the queue first lifted its JobSet's gate, which it does
only with the placement written, up to the Job's first suspension; the pods it created
meanwhile), and which pods they were.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.gate_invariants import Version, controller_uid


def _jobset_owner(job: Mapping[str, Any]) -> str | None:
    for ref in job["metadata"].get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "JobSet":
            return str(ref["uid"])
    return None


@dataclass
class EarlyStart:
    jobs: dict[str, int | None] = field(default_factory=dict)  # Job uid -> its first suspension's revision
    pods: set[str] = field(default_factory=set)  # uids

    @classmethod
    def of(cls, versions: Iterable[Version]) -> EarlyStart:
        """From versions in revision order (the JobSets' among them)."""
        found = cls()
        gated: set[str] = set()  # JobSets seen suspended
        lifted: set[str] = set()  # JobSets seen unsuspended after that: the queue lifted the gate
        seen: set[str] = set()
        for version in versions:
            obj, uid = version.obj, str(version.obj["metadata"].get("uid"))
            suspended = bool((obj.get("spec") or {}).get("suspend"))
            if version.kind == "JobSet" and not version.deleted:
                if suspended:
                    gated.add(uid)
                elif uid in gated:
                    lifted.add(uid)
            elif version.kind == "Job" and not version.deleted:
                owner = _jobset_owner(obj)
                if uid not in seen and owner is not None and not suspended and owner not in lifted:
                    found.jobs[uid] = None
                elif uid in found.jobs and found.jobs[uid] is None and suspended:
                    found.jobs[uid] = version.revision
            elif version.kind == "Pod" and uid not in seen:
                job = controller_uid(obj)
                if job in found.jobs and found.jobs[job] is None:
                    found.pods.add(uid)
            seen.add(uid)
        return found

    def covers(self, version: Version) -> bool:
        """Is this version part of the early start (left out of the judging)?"""
        uid = str(version.obj["metadata"].get("uid"))
        if version.kind == "Pod":
            return uid in self.pods
        if version.kind == "Job" and uid in self.jobs:
            ended = self.jobs[uid]
            return ended is None or version.revision < ended
        return False

    def unended(self) -> list[str]:
        """Early Jobs never suspended afterwards (the queue's gate never reached them)."""
        return [uid for uid, ended in self.jobs.items() if ended is None]
