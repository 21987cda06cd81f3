"""What the operator may do in the API, derived from its code.

Reads come from the informers each component registers on the Manager (every informer lists
and watches its resource). Writes cannot be seen that way, so each component declares them in
`WRITES` below, next to the core's own (events, the Lease, the webhook certificate). The Helm
chart's RBAC is tested against `required_permissions()` (nothing missing, nothing unused) and
the end-to-end run under the chart's ServiceAccount checks that every request the operator
really makes is declared here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rayquota.operator.config import OperatorConfig
from rayquota.operator.core import Manager, NamespaceScope, resources
from rayquota.operator.core.resources import Resource
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.ray.builders.ingress import INGRESSES
from rayquota.operator.ray.builders.networkpolicy import NETWORK_POLICIES
from rayquota.operator.ray.builders.route import ROUTES
from rayquota.operator.ray.rayservice.writes import GATEWAY_CLASSES, GATEWAYS, HTTPROUTES

ADMISSION_GROUP = "admissionregistration.k8s.io"
SECRETS = Resource("", "v1", "secrets", "Secret")
MUTATING_WEBHOOKS = Resource(
    ADMISSION_GROUP, "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False
)
VALIDATING_WEBHOOKS = Resource(
    ADMISSION_GROUP, "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False
)


@dataclass(frozen=True, order=True)
class Permission:
    """One verb on one resource (or subresource, "rayjobs/status")."""

    group: str
    resource: str
    verb: str
    namespaced: bool = True

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}.{self.group or 'core'}"


def _grant(resource: Resource, verbs: str, sub: str | None = None) -> set[Permission]:
    name = f"{resource.plural}/{sub}" if sub else resource.plural
    return {Permission(resource.group, name, verb, resource.namespaced) for verb in verbs.split()}


def _delegated_to_the_autoscaler() -> set[Permission]:
    """RBAC lets the operator create a Role only with permissions it holds itself, so it needs
    whatever the autoscaler's Role grants (read off the builder, not copied)."""
    from rayquota.operator.ray.builders.rbac import build_autoscaler_rbac

    sample = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "c", "namespace": "n", "uid": "u"},
        "spec": {},
    }
    held: set[Permission] = set()
    for collection, manifest in build_autoscaler_rbac(sample):
        if collection != "roles":
            continue
        for rule in manifest["rules"]:
            held |= {
                Permission(group, resource, verb)
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
            }
    return held


def _grants_of_queued_kinds() -> set[Permission]:
    """What each integration record says the queue writes on its kind."""
    held: set[Permission] = set()
    for adapter in ADAPTERS.values():
        for grant in adapter.grants:
            held |= _grant(*grant)
    return held


# Writes per component (by the names `main.Components.names()` gives), declared where a reader
# of this file can compare them with the code: status writes are PUTs on the status subresource
# (core/status.py), patches are merge or JSON patches, owned objects are created and left to the
# garbage collector unless listed.
WRITES: Mapping[str, frozenset[Permission]] = {
    "ray": frozenset(
        _grant(resources.RAYCLUSTERS, "create delete patch")  # RayJob's cluster; legacy finalizer
        | _grant(resources.RAYCLUSTERS, "update", "status")
        | _grant(resources.RAYJOBS, "delete patch")  # TTL deletion; finalizer
        | _grant(resources.RAYJOBS, "update", "status")
        | _grant(resources.PODS, "create delete patch")  # patch: re-stamp the operator version
        | _grant(resources.SERVICES, "create")
        | _grant(resources.JOBS, "create delete")  # the K8sJobMode submitter; the Redis cleanup Job
        # Token auth (ray/builders/auth_token.py): the per-cluster Secret is created, and the token read by
        # name for the operator's dashboard calls (not watched: that would cache every Secret).
        | _grant(SECRETS, "create get")
        # enableIngress (ray/builders/ingress.py): the head's Ingress, brought back to the spec.
        | _grant(INGRESSES, "create update")
        # The autoscaler sidecar's own ServiceAccount and Role.
        | _grant(resources.SERVICE_ACCOUNTS, "create")
        | _grant(resources.ROLES, "create")
        | _grant(resources.ROLE_BINDINGS, "create")
        | _delegated_to_the_autoscaler()
        # RayService (ray/rayservice_writes.py): its clusters, Services, Gateway API objects.
        | _grant(resources.RAYCLUSTERS, "update")
        | _grant(resources.RAYSERVICES, "update", "status")
        # KubeRay's ray.io/rayservice-finalizer on a RayService made under KubeRay, removed on
        # deletion (rayservice/reconciler.py): without it a migrated RayService never goes.
        | _grant(resources.RAYSERVICES, "patch")
        | _grant(resources.SERVICES, "update delete")
        | _grant(GATEWAY_CLASSES, "get")
        | _grant(GATEWAYS, "get create update delete")
        | _grant(HTTPROUTES, "get create update delete")
    ),
    # spec.networkPolicy (ray/builders/networkpolicy.py, KubeRay's RayClusterNetworkPolicy gate on): the
    # head's and each worker group's NetworkPolicy, kept to the spec, stale ones deleted.
    "networkpolicy": frozenset(_grant(NETWORK_POLICIES, "get create update delete")),
    # enableIngress on OpenShift without USE_INGRESS_ON_OPENSHIFT (ray/builders/route.py): the head's Route.
    "openshiftroute": frozenset(_grant(ROUTES, "create")),
    # RayCronJob (ray/raycronjob): creates the RayJob of each run, records the run in its status.
    "raycronjob": frozenset(
        _grant(resources.RAYJOBS, "create") | _grant(resources.RAYCRONJOBS, "update", "status")
    ),
    "queue": frozenset(
        _grant(resources.WORKLOADS, "create update")
        | _grant(resources.WORKLOADS, "update", "status")
        | _grant(resources.CLUSTER_QUEUES, "update", "status")
        # The resource-in-use finalizer (queue/admission/finalizers.py).
        | _grant(resources.CLUSTER_QUEUES, "patch")
        | _grant(resources.RESOURCE_FLAVORS, "patch")
        | _grant(resources.LOCAL_QUEUES, "update", "status")
        # The built-in rayquota.io/manual check controller marks its AdmissionChecks Active.
        | _grant(resources.ADMISSION_CHECKS, "update", "status")
        # The gate and the flavor's placement, written on the queued objects themselves.
        | _grants_of_queued_kinds()
        # Admission-only mode: the pod ungater lifts its scheduling gate and adds the flavor's
        # placement in one patch (queue/gating/pod_ungater.py); with the reconcilers on, theirs too;
        # in both modes the Job pod ungater the same on Jobs' pods (queue/gating/job_pod_ungater.py).
        | _grant(resources.PODS, "patch")
    ),
    # Serves; the chart owns the webhook configurations. A self-issued certificate adds the
    # SELF_ISSUED_CERT_* permissions below. (A loopback server for a local control plane
    # registers its own configurations: development only, with the local cluster's admin.)
    "webhooks": frozenset(),
    # MultiKueue (queue/multikueue): the workers' connection status; on the manager's objects the
    # status mirrored from the worker that runs them. What it writes in the workers goes with the
    # workers' own kubeconfigs.
    "multikueue": frozenset(
        _grant(resources.MULTIKUEUE_CLUSTERS, "update", "status")
        | _grant(resources.ADMISSION_CHECKS, "update", "status")
        | _grant(resources.WORKLOADS, "update", "status")
        | frozenset(
            permission
            for adapter in ADAPTERS.values()
            if adapter.multicluster is not None
            for permission in _grant(adapter.resource, "update", "status")
        )
    ),
}

# In the operator's own namespace, per component: MultiKueue reads each worker's kubeconfig
# Secret by name (not watched: that would cache every Secret there).
OWN_NAMESPACE_BY_COMPONENT: Mapping[str, frozenset[Permission]] = {
    "multikueue": frozenset(_grant(SECRETS, "get")),
}

# Whatever the components: the event recorder creates Events and bumps their count.
CORE_WRITES: frozenset[Permission] = frozenset(_grant(resources.EVENTS, "create patch"))

# In the operator's own namespace only (a Role, not the ClusterRole): the leader-election Lease
# (read, created once, renewed).
OWN_NAMESPACE: frozenset[Permission] = frozenset(_grant(resources.LEASES, "get create update"))

# A self-issued webhook certificate (webhooks/cert_keeper.py): its Secret, filled and renewed in the
# operator's namespace, and the caBundle of the webhook configurations (both by name).
SELF_ISSUED_CERT_OWN_NAMESPACE: frozenset[Permission] = frozenset(_grant(SECRETS, "get update"))
SELF_ISSUED_CERT_CLUSTER: frozenset[Permission] = frozenset(
    _grant(MUTATING_WEBHOOKS, "get patch") | _grant(VALIDATING_WEBHOOKS, "get patch")
)


@dataclass(frozen=True)
class RequiredPermissions:
    namespaced: frozenset[Permission]  # on namespaced resources, in every managed namespace
    cluster: frozenset[Permission]  # on cluster-scoped resources
    own_namespace: frozenset[Permission]  # in the operator's namespace


class UndeclaredComponent(LookupError):
    pass


def reads_of(manager: Manager) -> dict[Resource, set[Permission]]:
    return {i.resource: _grant(i.resource, "list watch") for i in manager.informers}


def required_permissions(
    manager: Manager, components: Iterable[str], *, self_issued_cert: bool
) -> RequiredPermissions:
    """The permissions of a Manager on which `components` ran their setup()."""
    wanted: set[Permission] = set(CORE_WRITES)
    for permissions in reads_of(manager).values():
        wanted |= permissions
    for component in components:
        if component not in WRITES:
            raise UndeclaredComponent(f"{component} declares no writes in rayquota.operator.permissions")
        wanted |= WRITES[component]
    cluster = {p for p in wanted if not p.namespaced}
    own_namespace = set(OWN_NAMESPACE)
    for component in components:
        own_namespace |= OWN_NAMESPACE_BY_COMPONENT.get(component, frozenset())
    if self_issued_cert:
        cluster |= SELF_ISSUED_CERT_CLUSTER
        own_namespace |= SELF_ISSUED_CERT_OWN_NAMESPACE
    return RequiredPermissions(
        namespaced=frozenset(wanted - cluster),
        cluster=frozenset(cluster),
        own_namespace=frozenset(own_namespace),
    )


def offline_manager(config: OperatorConfig) -> tuple[Manager, tuple[str, ...]]:
    """A Manager whose components ran setup() without any API server (setup only registers
    informers and controllers, so what they need can be read off it), and their names."""
    import kubernetes.client

    from rayquota.operator.components import setup_components
    from rayquota.operator.kube import KubeClient

    configuration = kubernetes.client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # never contacted
    manager = Manager(KubeClient(configuration), NamespaceScope.of(None))
    return manager, setup_components(manager, config).names()
