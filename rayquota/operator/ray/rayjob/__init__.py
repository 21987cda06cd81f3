"""RayJob: validation, timeouts, and the reconciler."""
