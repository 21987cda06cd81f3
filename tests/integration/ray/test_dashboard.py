"""The dashboard client against a real Ray head on loopback."""

from __future__ import annotations

import time
import uuid

import pytest

from rayquota.operator.ray.dashboard_api.dashboard import (
    DashboardUnreachable,
    JobAlreadyExists,
    JobNotFound,
    JobStatus,
    JobSubmission,
    RayDashboardClient,
    RetryPolicy,
)
from tests.integration.ray.rayhead import RayHead, free_port
from tests.polling import wait_for_async

pytestmark = pytest.mark.ray


async def wait_for_status(
    client: RayDashboardClient, job_id: str, wanted: set[JobStatus], timeout_s: float = 90.0
) -> JobStatus:
    async def reached() -> JobStatus | None:
        status = (await client.get_job(job_id)).status
        return status if status in wanted else None

    return await wait_for_async(f"job {job_id} in {wanted}", reached, timeout_s, interval_s=0.5)


async def test_submit_poll_logs_delete(ray_head: RayHead) -> None:
    submission_id = f"hello-{uuid.uuid4().hex[:8]}"
    async with RayDashboardClient(ray_head.dashboard_url) as client:
        returned = await client.submit_job(
            JobSubmission(
                entrypoint="python -c \"import os; print('hello from', os.environ['GREETING'])\"",
                submission_id=submission_id,
                runtime_env={"env_vars": {"GREETING": "rayquota"}},
                metadata={"owner": "test"},
                entrypoint_num_cpus=0.5,
            )
        )
        assert returned == submission_id
        assert await wait_for_status(client, submission_id, {JobStatus.SUCCEEDED, JobStatus.FAILED}) == (
            JobStatus.SUCCEEDED
        )
        info = await client.get_job(submission_id)
        assert info.submission_id == submission_id
        assert info.metadata == {"owner": "test"}
        assert info.start_time and info.end_time and info.end_time >= info.start_time
        assert "hello from rayquota" in await client.get_job_logs(submission_id)
        assert submission_id in {job.submission_id for job in await client.list_jobs()}

        with pytest.raises(JobAlreadyExists):
            await client.submit_job(JobSubmission(entrypoint="true", submission_id=submission_id))

        assert await client.delete_job(submission_id) is True
        with pytest.raises(JobNotFound) as not_found:
            await client.get_job(submission_id)
        assert not_found.value.status == 404


async def test_failing_job_reports_failed(ray_head: RayHead) -> None:
    async with RayDashboardClient(ray_head.dashboard_url) as client:
        job_id = await client.submit_job(JobSubmission(entrypoint="python -c 'import sys; sys.exit(3)'"))
        assert (
            await wait_for_status(client, job_id, {JobStatus.SUCCEEDED, JobStatus.FAILED}) == JobStatus.FAILED
        )
        info = await client.get_job(job_id)
        assert info.driver_exit_code == 3
        assert "exit code 3" in info.message


async def test_stop_long_running_job(ray_head: RayHead) -> None:
    async with RayDashboardClient(ray_head.dashboard_url) as client:
        job_id = await client.submit_job(JobSubmission(entrypoint="python -c 'import time; time.sleep(600)'"))
        await wait_for_status(client, job_id, {JobStatus.RUNNING})
        assert await client.stop_job(job_id) is True
        assert (
            await wait_for_status(client, job_id, {JobStatus.STOPPED, JobStatus.FAILED}) == JobStatus.STOPPED
        )
        # Stopping a finished job is not an error; it reports that nothing was stopped.
        assert await client.stop_job(job_id) is False
        assert await client.delete_job(job_id) is True


async def test_unknown_job_is_not_found(ray_head: RayHead) -> None:
    async with RayDashboardClient(ray_head.dashboard_url) as client:
        with pytest.raises(JobNotFound):
            await client.get_job("no-such-job")
        with pytest.raises(JobNotFound):
            await client.stop_job("no-such-job")


async def test_serve_applications_endpoint_answers(ray_head: RayHead) -> None:
    async with RayDashboardClient(ray_head.dashboard_url) as client:
        assert "ray_version" in await client.version()
        # ray[serve] is a locked test dependency: a 501 ("Serve is not installed") is a failure here.
        apps = await client.get_serve_applications()
        # No Serve app deployed: the dashboard still answers with its (empty) application map.
        assert apps.get("applications", {}) == {}


async def test_unreachable_dashboard_raises_after_bounded_retries() -> None:
    port = free_port()  # nothing listens here
    retry = RetryPolicy(attempts=3, initial_backoff_s=0.1, max_backoff_s=0.1)
    started = time.monotonic()
    async with RayDashboardClient(f"http://127.0.0.1:{port}", timeout_s=1.0, retry=retry) as client:
        with pytest.raises(DashboardUnreachable) as err:
            await client.get_job("anything")
    elapsed = time.monotonic() - started
    assert err.value.url.endswith("/api/jobs/anything")
    assert 0.2 <= elapsed < 5.0, elapsed  # two backoffs happened, and it gave up quickly
