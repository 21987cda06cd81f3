"""Pure parts of rayquota.localcluster.peers (the builds themselves need go and minutes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rayquota.localcluster import peers


def test_kuberay_runs_on_loopback_without_leader_election() -> None:
    argv = peers.kuberay_command(metrics_port=18080, health_port=18082, namespaces=["a", "b"])
    assert argv[0].endswith("/kuberay-operator-v1.6.2/kuberay-operator")
    assert "--metrics-addr=127.0.0.1:18080" in argv
    assert "--health-probe-bind-address=127.0.0.1:18082" in argv
    assert "--enable-leader-election=false" in argv
    assert "--watch-namespace=a,b" in argv
    assert not any(
        arg.startswith("--watch-namespace") for arg in peers.kuberay_command(metrics_port=1, health_port=2)
    )


def test_module_paths_are_escaped_like_the_module_cache() -> None:
    assert peers.escape_module_path("github.com/BurntSushi/toml") == "github.com/!burnt!sushi/toml"
    assert peers.escape_module_path("sigs.k8s.io/kueue") == "sigs.k8s.io/kueue"


def test_a_peer_is_built_only_when_every_binary_including_test_binaries_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAYQUOTA_CACHE_DIR", str(tmp_path))
    peer = peers.KUEUE_PERF
    assert peer.cache_dir == tmp_path / "bin" / "kueue-perf-v0.19.2"
    peer.cache_dir.mkdir(parents=True)
    for name in ("runner", "minimalkueue"):
        peer.path(name).write_text("#!/bin/sh\n")
        os.chmod(peer.path(name), 0o755)
    assert not peer.is_built()  # the checker (a `go test -c` binary) is missing
    peer.path("checker").write_text("#!/bin/sh\n")
    os.chmod(peer.path("checker"), 0o755)
    assert peer.is_built()
    assert peers.build(peer, log=False) == {n: peer.path(n) for n in ("runner", "minimalkueue", "checker")}
