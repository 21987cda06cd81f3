"""RayService: validation, the pure plan, status, the reconciler and its parts (clusters,
upgrades, traffic, suspension, writes)."""
