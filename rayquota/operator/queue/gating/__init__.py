"""Holding clusters and pods to what the recorded admission covers: the gate the Ray reconcilers ask,
the caps, placement, the pod gate and the ungaters."""
