"""The API models (``ray.io/v1`` and ``rayquota.io/v1alpha1``) and the CRDs generated from them.

Parse a raw object with ``Kind.from_body(body)``, write it back with ``obj.to_body()``; see
``common.KubeObject``.
"""
