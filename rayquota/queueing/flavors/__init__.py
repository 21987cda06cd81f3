"""Flavor assignment: which ResourceFlavor each pod set's resources take in a ClusterQueue, and
whether that fits, borrows or needs preemption (:mod:`.assignment`); the largest partial
admission that fits (:mod:`.partial_admission`).

Imports the values and :mod:`..quota`; asks preemption and topology through callables."""
