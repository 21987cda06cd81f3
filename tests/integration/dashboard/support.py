"""The dashboard process for the tests (``rayquota.dashboard.main.run`` in a thread), viewer
identities with real ServiceAccount tokens, and a real headless Chromium."""

from __future__ import annotations

import contextlib
import json
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rayquota.dashboard.settings import DashboardSettings

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass(frozen=True)
class Served:
    url: str
    port: int


@contextlib.contextmanager
def dashboard_thread(namespace_patterns: list[str], **settings: Any) -> Iterator[Served]:
    """The dashboard on a free loopback port, watching ``namespace_patterns``."""
    from rayquota.dashboard import main

    stop = threading.Event()
    bound: list[int] = []
    thread = threading.Thread(
        target=main.run,
        kwargs={
            "namespaces": namespace_patterns,
            "settings": DashboardSettings(port=0, **settings),
            "stop_flag": stop,
            "ready": bound.append,
        },
        name="rayquota-dashboard",
        daemon=True,
    )
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not bound:
            assert thread.is_alive(), "the dashboard thread exited during start-up"
            assert time.monotonic() < deadline, "the dashboard did not serve within 60s"
            time.sleep(0.05)
        yield Served(f"http://127.0.0.1:{bound[0]}", bound[0])
    finally:
        stop.set()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the dashboard did not stop within 30s"


def role_and_binding(
    name: str, rules: list[dict[str, Any]], subject: tuple[str, str], namespace: str | None = None
) -> list[dict[str, Any]]:
    """A Role (ClusterRole when ``namespace`` is None) and its binding to the ServiceAccount
    ``subject`` (namespace, name)."""
    scope = "Role" if namespace else "ClusterRole"
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    group = "rbac.authorization.k8s.io"
    return [
        {"apiVersion": f"{group}/v1", "kind": scope, "metadata": meta, "rules": rules},
        {
            "apiVersion": f"{group}/v1",
            "kind": f"{scope}Binding",
            "metadata": meta,
            "roleRef": {"apiGroup": group, "kind": scope, "name": name},
            "subjects": [{"kind": "ServiceAccount", "namespace": subject[0], "name": subject[1]}],
        },
    ]


def viewer_token(control_plane: Any, namespace: str, name: str, rules: list[dict[str, Any]] | None) -> str:
    """A ServiceAccount ``name`` in ``namespace``; ``rules`` None: may list everything the
    dashboard shows cluster-wide (the viewer ClusterRole, named ``<namespace>-<name>``); else a
    Role with these rules in ``namespace`` only. Returns a token from the TokenRequest API."""
    from rayquota.dashboard.viewer_rbac import viewer_rules
    from rayquota.operator.queue.kueue.api_group import RAYQUOTA

    kubectl = control_plane.kubectl
    kubectl("create", "serviceaccount", name, "-n", namespace)
    if rules is None:
        documents = role_and_binding(f"{namespace}-{name}", viewer_rules(RAYQUOTA), (namespace, name))
    else:
        documents = role_and_binding(name, rules, (namespace, name), namespace)
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))
    return str(kubectl("create", "token", name, "-n", namespace, "--duration", "1h").stdout).strip()


def delete_cluster_rbac(control_plane: Any, name: str) -> None:
    control_plane.kubectl("delete", "clusterrolebinding,clusterrole", name, "--wait=false", check=False)


def get(
    url: str, token: str | None = None, headers: Mapping[str, str] | None = None, method: str = "GET"
) -> Any:
    """(status, headers, body as JSON or text) of one request."""
    request = urllib.request.Request(url, method=method, headers=dict(headers or {}))
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            status, got, raw = answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        status, got, raw = error.code, dict(error.headers), error.read()
    text = raw.decode()
    try:
        return status, got, json.loads(text)
    except ValueError:
        return status, got, text


@contextlib.contextmanager
def chromium(viewport: tuple[int, int] = (1280, 900)) -> Iterator[Any]:
    """A browser context of Debian's Chromium with a fresh profile."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver, tempfile.TemporaryDirectory(prefix="rq-chromium-") as profile:
        context = driver.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": viewport[0], "height": viewport[1]},
        )
        try:
            yield context
        finally:
            context.close()


def screenshot(page: Any, out: Path, name: str) -> Path:
    path = out / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000, f"screenshot {path} is empty"
    return path
