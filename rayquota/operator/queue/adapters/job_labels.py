"""The labels the Kubernetes Job controller puts on a Job's pods (a queued Job's, a RayJob's
submitter's): the pod watches index them by these."""

# What the Job controller labels its pods with (the newer key, and the older one).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"
