"""A dashboard stops at once even while a browser keeps a live stream open: the operator stops it
before it releases its leader Lease, so waiting for the stream held ``make run``'s stop."""

from __future__ import annotations

import http.client
import time

from tests.integration.dashboard.support import dashboard_thread

STOP_WITHIN_S = 3.0


def test_a_dashboard_with_an_open_live_stream_stops_within_seconds(admin_token: str) -> None:
    # Samples every minute: a stream's next write (its keep-alive) is 15 s away.
    with dashboard_thread(["d-*"], history_interval_s=60.0) as served:
        connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
        connection.request(
            "GET", "/api/live?view=/api/whoami", headers={"Authorization": f"Bearer {admin_token}"}
        )
        response = connection.getresponse()
        assert response.status == 200
        assert response.readline().startswith(b"event: view")  # the stream is open and served
        stopping = time.monotonic()
    stopped_after_s = time.monotonic() - stopping
    connection.close()
    assert stopped_after_s < STOP_WITHIN_S, f"stopped after {stopped_after_s:.1f}s"
