"""The one generic Workload reconciler and its parts: the Workload's body, check outcomes, pods-ready
eviction, restores, owner-less Workloads, which events reach it."""
