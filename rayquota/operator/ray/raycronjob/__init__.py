"""RayCronJob (KubeRay v1.6+): a RayJob created from `spec.jobTemplate` on a cron schedule.

- `schedule`: the cron expression and time zone, parsed once (croniter does the calendar).
- `validation`: KubeRay's rules for the kind (name length, schedule, time zone, the template).
- `plan`: pure; given the object and the time, what to do now (create which RayJob, or wait).
- `reconciler`: the thin controller around the plan; its clock is a parameter.
"""
