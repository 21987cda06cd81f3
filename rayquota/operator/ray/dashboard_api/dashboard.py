"""Async client for the Ray dashboard's REST API (jobs and Serve applications).

The operator talks to every Ray head through this client. Errors are typed so that
reconcilers can tell "the head is not up yet" (DashboardUnreachable) from "the head
answered no" (DashboardError with the HTTP status and body).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

# The dashboard's job statuses are the RayJob's jobStatus values.
from rayquota.api.ray_v1 import JobStatus
from rayquota.operator.ray.dashboard_api.dashboard_dns import BoundedWaitResolver

log = logging.getLogger(__name__)

DEFAULT_DASHBOARD_PORT = 8265


class DashboardUnreachable(Exception):
    """The dashboard could not be reached (connection refused, timeout, DNS) after all retries."""

    def __init__(self, url: str, cause: BaseException | str) -> None:
        super().__init__(f"Ray dashboard unreachable at {url}: {cause}")
        self.url = url
        self.cause = cause


class DashboardError(Exception):
    """The dashboard answered with an HTTP error."""

    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        super().__init__(f"{method} {url} -> HTTP {status}: {_summary(body)}")
        self.method = method
        self.url = url
        self.status = status
        self.body = body


class JobNotFound(DashboardError):
    """The job (by submission id or job id) is unknown to this Ray cluster."""


class JobAlreadyExists(DashboardError):
    """A job with this submission id was already submitted (a submit is safe to repeat)."""


@dataclass(frozen=True)
class JobSubmission:
    """The body of POST /api/jobs/; None fields are left out."""

    entrypoint: str
    submission_id: str | None = None
    runtime_env: Mapping[str, Any] | None = None
    metadata: Mapping[str, str] | None = None
    entrypoint_num_cpus: float | None = None
    entrypoint_num_gpus: float | None = None
    entrypoint_memory: int | None = None
    entrypoint_resources: Mapping[str, float] | None = None

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"entrypoint": self.entrypoint}
        optional: dict[str, Any] = {
            "submission_id": self.submission_id,
            "runtime_env": dict(self.runtime_env) if self.runtime_env is not None else None,
            "metadata": dict(self.metadata) if self.metadata is not None else None,
            "entrypoint_num_cpus": self.entrypoint_num_cpus,
            "entrypoint_num_gpus": self.entrypoint_num_gpus,
            "entrypoint_memory": self.entrypoint_memory,
            "entrypoint_resources": (
                dict(self.entrypoint_resources) if self.entrypoint_resources is not None else None
            ),
        }
        payload.update({k: v for k, v in optional.items() if v is not None})
        return payload


@dataclass(frozen=True)
class JobInfo:
    """The fields of GET /api/jobs/{id} the operator uses (times in ms since the epoch)."""

    submission_id: str | None
    job_id: str | None
    status: JobStatus
    entrypoint: str = ""
    message: str = ""
    error_type: str | None = None
    start_time: int | None = None
    end_time: int | None = None
    driver_exit_code: int | None = None
    metadata: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobInfo:
        return cls(
            submission_id=data.get("submission_id"),
            job_id=data.get("job_id"),
            status=JobStatus(data.get("status", "PENDING")),
            entrypoint=data.get("entrypoint") or "",
            message=data.get("message") or "",
            error_type=data.get("error_type"),
            start_time=data.get("start_time") or None,
            end_time=data.get("end_time") or None,
            driver_exit_code=data.get("driver_exit_code"),
            metadata=dict(data.get("metadata") or {}),
        )


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff for connection errors, timeouts and 5xx answers."""

    attempts: int = 3
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 2.0

    def backoff(self, attempt: int) -> float:
        return float(min(self.max_backoff_s, self.initial_backoff_s * (2.0**attempt)))


class RayDashboardClient:
    """One dashboard, one client. Use as an async context manager or call close()."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        session: aiohttp.ClientSession | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """`headers` go on every request (the auth token of a cluster with token auth)."""
        self.base_url = base_url.rstrip("/")
        self._headers = dict(headers or {})
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._retry = retry or RetryPolicy()
        self._session = session
        self._owns_session = session is None

    async def __aenter__(self) -> RayDashboardClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def _request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        retry_server_errors: bool = True,
        duplicate_after_retry_ok: bool = False,
    ) -> Any:
        url = f"{self.base_url}{path}"
        last_cause: BaseException | str = "no attempt made"
        for attempt in range(self._retry.attempts):
            if attempt:
                await asyncio.sleep(self._retry.backoff(attempt - 1))
            try:
                async with self._get_session().request(
                    method, url, json=json_body, timeout=self._timeout, headers=self._headers
                ) as resp:
                    text = await resp.text()
                    if resp.status >= 400 and _is_duplicate(text):
                        if attempt and duplicate_after_retry_ok:
                            # An earlier attempt was accepted although its answer was an error.
                            return None
                        raise JobAlreadyExists(method, url, resp.status, text)
                    if resp.status >= 500 and retry_server_errors and attempt + 1 < self._retry.attempts:
                        last_cause = f"HTTP {resp.status}"
                        log.debug("dashboard %s %s -> %s, retrying", method, url, resp.status)
                        continue
                    if resp.status >= 400:
                        raise _error_for(method, url, resp.status, text)
                    if not text:
                        return None
                    try:
                        return await resp.json(content_type=None)
                    except ValueError:
                        return text
            except (aiohttp.ClientConnectionError, TimeoutError) as exc:
                last_cause = exc
                log.debug("dashboard %s %s failed (%s), attempt %d", method, url, exc, attempt + 1)
        raise DashboardUnreachable(url, last_cause)

    # --- jobs ---------------------------------------------------------------------------------

    async def submit_job(self, submission: JobSubmission) -> str:
        """Submit a job and return its submission id.

        A 5xx answer is retried only when the submission id is fixed: the server may have
        accepted the first attempt, and a fixed id makes the repeat detectable.
        """
        data = await self._request(
            "POST",
            "/api/jobs/",
            json_body=submission.to_payload(),
            retry_server_errors=submission.submission_id is not None,
            duplicate_after_retry_ok=True,
        )
        if data is None and submission.submission_id is not None:
            return submission.submission_id
        return str(data["submission_id"])

    async def get_job(self, job_or_submission_id: str) -> JobInfo:
        data = await self._request("GET", f"/api/jobs/{job_or_submission_id}")
        return JobInfo.from_dict(data)

    async def list_jobs(self) -> list[JobInfo]:
        data = await self._request("GET", "/api/jobs/")
        return [JobInfo.from_dict(item) for item in data if item.get("status")]

    async def get_job_logs(self, job_or_submission_id: str) -> str:
        data = await self._request("GET", f"/api/jobs/{job_or_submission_id}/logs")
        return str(data.get("logs", "")) if isinstance(data, dict) else str(data or "")

    async def stop_job(self, job_or_submission_id: str) -> bool:
        """Ask Ray to stop the job; False when it had already finished.

        Ray answers "stopped" whenever the job's supervisor actor is alive, and the supervisor
        writes the terminal status some time before it exits (longer on a loaded machine). So a
        job already STOPPED/SUCCEEDED/FAILED would still "stop"; its status is read first.
        """
        if (await self.get_job(job_or_submission_id)).status.is_terminal:
            return False
        data = await self._request("POST", f"/api/jobs/{job_or_submission_id}/stop")
        return bool(data.get("stopped")) if isinstance(data, dict) else False

    async def delete_job(self, job_or_submission_id: str) -> bool:
        """Delete a finished job's record and logs (Ray refuses to delete a running job)."""
        data = await self._request("DELETE", f"/api/jobs/{job_or_submission_id}")
        return bool(data.get("deleted")) if isinstance(data, dict) else False

    # --- serve --------------------------------------------------------------------------------

    async def get_serve_applications(self) -> dict[str, Any]:
        data = await self._request("GET", "/api/serve/applications/")
        return dict(data or {})

    async def put_serve_applications(self, config: Mapping[str, Any]) -> None:
        """Deploy a Serve config (the serveConfigV2 document, parsed)."""
        await self._request("PUT", "/api/serve/applications/", json_body=dict(config))

    async def version(self) -> dict[str, Any]:
        data = await self._request("GET", "/api/version")
        return dict(data or {})


class DashboardClients:
    """Clients for any number of Ray dashboards over one shared aiohttp session.

    Heads come and go (each RayJob attempt may get a new cluster). A session per dashboard URL
    would keep a connection pool for every head ever seen; one session with a bounded connector
    keeps at most `max_connections` sockets in all, and idle keep-alive sockets close by
    themselves. Clients hold no state of their own, so one is made per call.
    """

    def __init__(
        self,
        *,
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        max_connections: int = 64,
        max_connections_per_dashboard: int = 4,
    ) -> None:
        self._timeout_s = timeout_s
        self._retry = retry
        self._max_connections = max_connections
        self._max_per_dashboard = max_connections_per_dashboard
        self._session: aiohttp.ClientSession | None = None
        self._resolver: BoundedWaitResolver | None = None

    def client(self, address: str, headers: Mapping[str, str] | None = None) -> RayDashboardClient:
        """A client for the dashboard at `address` ("host:port" or a URL); `headers` go on every
        request."""
        url = address if address.startswith(("http://", "https://")) else f"http://{address}"
        return RayDashboardClient(
            url, timeout_s=self._timeout_s, retry=self._retry, session=self._shared(), headers=headers
        )

    def _shared(self) -> aiohttp.ClientSession:
        # Made on first use: an aiohttp session belongs to the event loop that is running then.
        if self._session is None or self._session.closed:
            # Name lookups that never hold a caller long (a head's name that does not resolve
            # can take seconds), on threads of their own.
            self._resolver = self._resolver or BoundedWaitResolver()
            connector = aiohttp.TCPConnector(
                limit=self._max_connections,
                limit_per_host=self._max_per_dashboard,
                resolver=self._resolver,
            )
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=self._timeout_s)
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._resolver is not None:
            await self._resolver.close()
            self._resolver = None


def _error_for(method: str, url: str, status: int, body: str) -> DashboardError:
    if status == 404:
        return JobNotFound(method, url, status, body)
    return DashboardError(method, url, status, body)


def _is_duplicate(body: str) -> bool:
    # Ray reports a repeated submission id as 400, or as 500 when the head relays the agent's 400.
    return "already exists" in body and "submission_id" in body


def _summary(body: str, limit: int = 600) -> str:
    # Ray answers errors with a Python traceback; its last lines say what went wrong.
    body = body.strip()
    return body if len(body) <= limit else "..." + body[-limit:]
