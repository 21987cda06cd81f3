"""The read-only web dashboard: quotas, queue order, why each workload waits, and the Ray
objects behind each Workload, live. See docs/dashboard.md.

It reads the same watch-fed cache the operator runs on (``rayquota.operator.core`` informers on
a ``Manager``) and computes the engine's queue order by running the engine's pure code over the
cached objects (:mod:`.queue_model`). Served by aiohttp (:mod:`.server`), either as its own
process (``rayquota dashboard``) or inside the operator (``rayquota run --dashboard-port``).
"""
