"""A real Prometheus on loopback scraping one target every second, for the tests that read the
operator's metrics through PromQL (the History page, the Grafana dashboard's queries).

Debian's `prometheus` (installed by `make test` when missing), its own storage under the test's
tmp_path, stopped by its PID.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rayquota.ports import free_port
from tests.polling import wait_for

PROMETHEUS = Path("/usr/bin/prometheus")


@contextmanager
def prometheus_scraping(
    target: str, tmp_path: Path, scraped: tuple[str, Callable[[str], object]]
) -> Iterator[str]:
    """Prometheus scraping ``target`` (host:port); yields its URL once ``scraped``'s check (given
    the URL) is true, described by ``scraped``'s first item."""
    if not PROMETHEUS.exists():
        pytest.fail(f"{PROMETHEUS} is missing: `make prometheus` installs Debian's prometheus")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs:\n  - job_name: rayquota\n    static_configs: [{{targets: ['{target}']}}]\n"
    )
    port = free_port()
    with (tmp_path / "prometheus.log").open("w") as log:
        process = subprocess.Popen(
            [
                str(PROMETHEUS),
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            what, check = scraped
            wait_for(what, lambda: check(url), 60)
            yield url
        finally:
            process.terminate()
            process.wait(30)
