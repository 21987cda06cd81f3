"""`rayquota run`, with every API request it makes appended to the file that
RAYQUOTA_TEST_REQUEST_LOG names, one "METHOD PATH" line each (a watch is "WATCH PATH").

The chart's RBAC is checked against these lines: what the operator really asked the API
server for, not what anyone thinks it asks for. Run as `python -m tests.e2e.recording_operator run ...`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from typing import Any

from rayquota import cli
from rayquota.operator import kube

LOG = os.environ["RAYQUOTA_TEST_REQUEST_LOG"]
_request = kube.KubeClient.request
_stream_lines = kube.KubeClient.stream_lines


def _record(line: str) -> None:
    with open(LOG, "a") as out:
        out.write(line + "\n")


async def _recorded_request(self: kube.KubeClient, method: str, path: str, **kwargs: Any) -> Any:
    _record(f"{method} {path}")
    return await _request(self, method, path, **kwargs)


def _recorded_stream_lines(self: kube.KubeClient, path: str, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
    _record(f"WATCH {path}")
    return _stream_lines(self, path, *args, **kwargs)


kube.KubeClient.request = _recorded_request  # type: ignore[method-assign]
kube.KubeClient.stream_lines = _recorded_stream_lines  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(cli.main())
