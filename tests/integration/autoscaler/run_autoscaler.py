"""Ray's KubeRay autoscaler (``ray kuberay-autoscaler``) as the head pod's sidecar runs it, started
outside a pod: run by path, ``python run_autoscaler.py CLUSTER NAMESPACE GCS_ADDRESS TOKEN_FILE``.

In a pod it reads the ServiceAccount token the kubelet projects at a fixed path; here the same
token (minted for the RayCluster's ServiceAccount) is in a file of the test's, and the only
change made to Ray's code is that path. The API server's address and CA come from the
variables the autoscaler reads in a pod (KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT_HTTPS,
RAY_KUBERAY_CA_CERT_PATH), set by the caller.
"""

import sys


def main() -> None:
    cluster, namespace, gcs_address, token_file = sys.argv[1:5]
    from ray.autoscaler._private.kuberay import node_provider

    node_provider.IN_CLUSTER_TOKEN_PATH = token_file
    from ray.autoscaler._private.kuberay.run_autoscaler import run_kuberay_autoscaler

    run_kuberay_autoscaler(cluster, namespace, gcs_address)


if __name__ == "__main__":
    main()
