"""What JobSet's controller does with a JobSet's Jobs, for tests on the local control plane
(which runs no JobSet controller; the queue's JobSet integration reads and writes only the
JobSet, and the pods come from its Jobs through the Kubernetes Job controller).

Written from JobSet's controller's documented behaviour (kubernetes-sigs/jobset,
``pkg/controllers/jobset_controller.go``), only what the queue's gate depends on:

- each replicatedJob's ``replicas`` Jobs, ``<jobset>-<replicatedJob>-<index>``, are created as
  soon as the JobSet is seen, from the replicatedJob's template, with ``spec.suspend`` copied
  from the JobSet's *as read then* (a JobSet written unsuspended gets unsuspended Jobs at once,
  whatever the queue writes a moment later), controlled by the JobSet and labelled (Job and pod
  template) with ``jobset.sigs.k8s.io/jobset-name``, ``.../replicatedjob-name`` and
  ``.../job-index``;
- a suspended JobSet's active Jobs are suspended (the Job controller deletes their pods);
- an unsuspended JobSet's suspended Jobs are resumed: their ``status.startTime`` cleared first,
  then the replicatedJob's pod template's labels, annotations and nodeSelector merged into
  theirs (the template's values win) and its tolerations and scheduling gates added to theirs,
  in the same update that clears ``suspend`` (the way a queue's placement reaches the pods);
- a deleted JobSet's Jobs go with it by the garbage collector (owner references), not here.

Not done: success and failure policies, startup policies, restarts, headless Services.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
RESYNC_S = 1.0  # every JobSet is reconciled again this often (what its Jobs' events would do)


def job_name(jobset: str, replicated_job: str, index: int) -> str:
    return f"{jobset}-{replicated_job}-{index}"


def _labelled(meta: dict[str, Any], jobset: str, replicated: str, index: int) -> None:
    meta["labels"] = {
        **(meta.get("labels") or {}),
        JOBSET_NAME: jobset,
        REPLICATED_JOB: replicated,
        JOB_INDEX: str(index),
    }


def new_job(jobset: Mapping[str, Any], replicated: Mapping[str, Any], index: int) -> dict[str, Any]:
    """The Job JobSet's controller creates: suspended as the JobSet is now."""
    meta, name = jobset["metadata"], str(replicated["name"])
    template = copy.deepcopy(dict(replicated.get("template") or {}))
    job_meta = {
        "name": job_name(str(meta["name"]), name, index),
        "namespace": meta["namespace"],
        "labels": dict((template.get("metadata") or {}).get("labels") or {}),
        "ownerReferences": [
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "JobSet",
                "name": meta["name"],
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    spec = dict(template.get("spec") or {})
    _labelled(job_meta, str(meta["name"]), name, index)
    _labelled(spec.setdefault("template", {}).setdefault("metadata", {}), str(meta["name"]), name, index)
    spec["suspend"] = bool((jobset.get("spec") or {}).get("suspend"))
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": spec}


def _merged_list(have: list[Any] | None, add: list[Any] | None) -> list[Any]:
    out = list(have or [])
    return out + [item for item in add or [] if item not in out]


def resume_patch(job: Mapping[str, Any], pod_template: Mapping[str, Any]) -> dict[str, Any]:
    """The update that resumes a suspended Job with what its replicatedJob's template says now."""
    have = (job.get("spec") or {}).get("template") or {}
    have_meta, want_meta = have.get("metadata") or {}, pod_template.get("metadata") or {}
    have_spec, want_spec = have.get("spec") or {}, pod_template.get("spec") or {}
    return {
        "spec": {
            "suspend": False,
            "template": {
                "metadata": {
                    "labels": {**(have_meta.get("labels") or {}), **(want_meta.get("labels") or {})},
                    "annotations": {
                        **(have_meta.get("annotations") or {}),
                        **(want_meta.get("annotations") or {}),
                    },
                },
                "spec": {
                    "nodeSelector": {
                        **(have_spec.get("nodeSelector") or {}),
                        **(want_spec.get("nodeSelector") or {}),
                    },
                    "tolerations": _merged_list(have_spec.get("tolerations"), want_spec.get("tolerations")),
                    "schedulingGates": _merged_list(
                        have_spec.get("schedulingGates"), want_spec.get("schedulingGates")
                    ),
                },
            },
        }
    }


def _finished(job: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


class JobSetController:
    """Reconciles the JobSets of one namespace from :meth:`start` to :meth:`close`."""

    def __init__(self, kubeconfig: str, namespace: str) -> None:
        self.namespace = namespace
        self.api = config.new_client_from_config(config_file=kubeconfig)
        self.custom, self.batch = client.CustomObjectsApi(self.api), client.BatchV1Api(self.api)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"jobset-controller-{namespace}", daemon=True)

    def start(self) -> JobSetController:
        self._thread.start()
        return self

    def close(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(timeout=15)
            self.api.close()

    def __enter__(self) -> JobSetController:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the loop ------------------------------------------------------------------------------

    def _run(self) -> None:
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    listed: dict[str, Any] = self.custom.list_namespaced_custom_object(
                        GROUP, VERSION, self.namespace, PLURAL
                    )
                    version = str(listed["metadata"]["resourceVersion"])
                    for jobset in listed.get("items") or []:
                        self.reconcile(jobset)
                stream = watch.Watch().stream(
                    self.custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL,
                    resource_version=version,
                    timeout_seconds=int(RESYNC_S),
                )
                for event in stream:
                    if event["type"] == "ERROR":
                        version = None  # expired: list again
                        break
                    version = str(event["object"]["metadata"]["resourceVersion"])
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.reconcile(event["object"])
                    if self._stop.is_set():
                        break
                else:
                    version = None  # the watch timed out: reconcile every JobSet again (a resync)
            except Exception as exc:  # a conflict, a connection reset under load: the next pass retries
                if self._stop.is_set():
                    return
                log.warning(
                    "JobSet controller in %s: %s; trying again",
                    self.namespace,
                    " ".join(str(exc).split())[:500],
                )
                version = None
                time.sleep(0.2)

    def reconcile(self, jobset: Mapping[str, Any]) -> None:
        meta = jobset["metadata"]
        if meta.get("deletionTimestamp"):
            return
        selector = f"{JOBSET_NAME}={meta['name']}"
        listed = self.batch.list_namespaced_job(self.namespace, label_selector=selector)
        jobs = self.api.sanitize_for_serialization(listed).get("items") or []
        owned: dict[str, dict[str, Any]] = {
            j["metadata"]["name"]: j
            for j in jobs
            if any(ref.get("uid") == meta["uid"] for ref in j["metadata"].get("ownerReferences") or [])
        }
        suspended = bool((jobset.get("spec") or {}).get("suspend"))
        for replicated in (jobset.get("spec") or {}).get("replicatedJobs") or []:
            replicas = replicated.get("replicas")
            for index in range(1 if replicas is None else int(replicas)):
                name = job_name(str(meta["name"]), str(replicated["name"]), index)
                job = owned.get(name)
                if job is None:
                    self._create(new_job(jobset, replicated, index))
                elif _finished(job):
                    continue
                elif suspended and not (job.get("spec") or {}).get("suspend"):
                    self.batch.patch_namespaced_job(name, self.namespace, {"spec": {"suspend": True}})
                elif not suspended and (job.get("spec") or {}).get("suspend"):
                    self._resume(job, ((replicated.get("template") or {}).get("spec") or {}).get("template"))

    def _create(self, job: dict[str, Any]) -> None:
        try:
            self.batch.create_namespaced_job(self.namespace, job)
        except ApiException as exc:
            if exc.status != 409:  # already there: a resync raced the watch
                raise

    def _resume(self, job: Mapping[str, Any], pod_template: Mapping[str, Any] | None) -> None:
        name = str(job["metadata"]["name"])
        if (job.get("status") or {}).get("startTime"):
            # The template may change only while the Job has no start time.
            self.batch.patch_namespaced_job_status(name, self.namespace, {"status": {"startTime": None}})
        self.batch.patch_namespaced_job(name, self.namespace, resume_patch(job, pod_template or {}))
