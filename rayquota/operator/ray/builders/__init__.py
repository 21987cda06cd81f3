"""Pure builders of what a RayCluster gets, as KubeRay builds it: pods, probes, `ray start`, Services,
RBAC, Ingress, Route, NetworkPolicies, autoscaler, GCS FT, token auth."""
