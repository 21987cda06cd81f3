"""Kueue's visibility API (pending workloads and their positions), served by the operator as an
aggregated API: the API server proxies ``/apis/<group>/<version>/...`` to it, so ``kubectl get
--raw`` and RBAC work as for any API. The answers come from the admission engine's own order."""
