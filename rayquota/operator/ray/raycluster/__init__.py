"""RayCluster: validation, the pure plan, status, the reconciler, and the quota caps it applies."""
