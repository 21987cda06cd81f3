"""The engine: its memory and the events that change it (:mod:`.events`, with the admission
checks' part in :mod:`.check_events`, the lines workloads wait in in :mod:`.routing`), the
judgement of one workload (:mod:`.scheduling`, with :mod:`.cycle_holds`) and the cycle that
walks the queues (:mod:`.cycle`, with :mod:`.cycle_line`).

The top of the layers: it composes quota, flavors, preemption and topology."""
