"""Preemption: the victims that free quota for a workload within its queue and cohort tree
(:mod:`.victims`), fair sharing's victim search (:mod:`.fair_victims`), and the oracle flavor
assignment asks what preemption could do in a flavor (:mod:`.victim_oracle`).

Imports the values, :mod:`..quota` and :mod:`..flavors` (the oracle answers in its terms)."""
