"""RayCluster bodies for unit tests (camelCase dicts, as the API server returns them)."""

from __future__ import annotations

import copy
from typing import Any

BASE_CLUSTER: dict[str, Any] = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "demo", "namespace": "team-a", "uid": "uid-1", "generation": 3},
    "spec": {
        "rayVersion": "2.41.0",
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {
                    "containers": [
                        {
                            "name": "ray-head",
                            "image": "rayproject/ray:2.41.0",
                            "resources": {
                                "limits": {"cpu": "2", "memory": "4Gi"},
                                "requests": {"cpu": "1", "memory": "2Gi"},
                            },
                        }
                    ]
                },
            },
        },
        "workerGroupSpecs": [
            {
                "groupName": "gpu",
                "replicas": 2,
                "minReplicas": 1,
                "maxReplicas": 4,
                "rayStartParams": {},
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "ray-worker",
                                "image": "rayproject/ray:2.41.0-gpu",
                                "resources": {
                                    "limits": {"cpu": "1500m", "memory": "8Gi", "nvidia.com/gpu": "1"},
                                },
                            }
                        ],
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                    }
                },
            }
        ],
    },
}


def cluster(**spec_overrides: Any) -> dict[str, Any]:
    body = copy.deepcopy(BASE_CLUSTER)
    body["spec"].update(spec_overrides)
    return body
