"""Topology-aware scheduling: free capacity per domain (:mod:`.capacity`), the placement of pod
sets in domains (:mod:`.fit`), topology in admission and its victims (:mod:`.admission`), and
the engine's component that takes the Topology, Node and pod events (:mod:`.events`).

Imports the values, :mod:`..quota` and :mod:`..preemption` (the victims' eligibility)."""
