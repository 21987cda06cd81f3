"""A tiny Ray Serve application for the samples and tests on a local Ray head.

Serve imports an application by path, and the local head runs this virtualenv's Python, so a
module of this package is importable there without uploading code. ``args``: ``message`` (the
answer), ``fail`` (raise at start-up, which Serve reports as DEPLOY_FAILED).
"""

from __future__ import annotations

from typing import Any

from ray import serve


@serve.deployment(ray_actor_options={"num_cpus": 0})
class Greeter:
    def __init__(self, message: str, fail: bool) -> None:
        if fail:
            raise RuntimeError("the demo application was told to fail at start-up")
        self.message = message

    async def __call__(self, request: Any) -> str:
        return self.message


def app(args: dict[str, Any]) -> Any:
    """Serve's application builder (import_path: rayquota.devtools.rayservice_demo_app:app)."""
    # serve.deployment turns the class into a Deployment, which has bind(); mypy sees the class.
    return Greeter.bind(str(args.get("message", "hello")), bool(args.get("fail", False)))  # type: ignore[attr-defined]
