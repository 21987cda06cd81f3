"""MultiKueue: the ``kueue.x-k8s.io/multikueue`` admission-check controller of a manager cluster,
which dispatches reserved workloads to worker clusters (docs/multicluster.md)."""
