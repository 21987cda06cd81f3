"""``rayquota cluster status`` of a cluster whose state was purged (or never created)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rayquota.localcluster.cluster import LocalCluster


def test_status_after_a_purge_names_no_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAYQUOTA_STATE_DIR", str(tmp_path / "clusters"))
    cluster = LocalCluster("purged")
    (cluster.state_dir / "logs").mkdir(parents=True)
    assert str(cluster.state_dir) in cluster.status_lines()[0]  # set up: where its state is
    cluster.down(quiet=True, purge=True)
    assert not cluster.state_dir.exists()
    [line] = cluster.status_lines()
    assert str(cluster.state_dir) not in line
    assert line == (
        "cluster 'purged': not started (no state: never set up, or purged); `rayquota cluster up` starts it"
    )
