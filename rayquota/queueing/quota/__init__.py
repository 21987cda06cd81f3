"""Quota: the cohort tree with its quota and usage per node (:mod:`.cohorts`), the charging and
freeing of admitted workloads (:mod:`.accounting`), the per-queue and per-workload state the
engine keeps (:mod:`.state`), fair sharing's shares (:mod:`.fairsharing`) and admission fair
sharing's usage ledger (:mod:`.admission_fair_sharing`).

Imports only the values at the top of :mod:`rayquota.queueing` (model, policies, decisions)."""
