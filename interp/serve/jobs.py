"""Long work (patching sweeps) as jobs: run in their own threads, report progress step by
step, and stop at the next step when cancelled.

Example:
    >>> jobs = Jobs()
    >>> job = jobs.start(total=4, work=lambda step: [step() for _ in range(4)] and {})
    >>> jobs.get(job.id).state in ("running", "done")   # running, then done
    True
    >>> jobs.shutdown()   # waits for the job threads
    >>> job.status()["state"], job.done
    ('done', 4)
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from interp.serve.errors import ApiError

JOB_THREADS = 2
MAX_UNFINISHED = 32
KEEP_FINISHED = 64


class JobCancelled(Exception):
    """Raised inside a job's work at its next step after ``cancel()``."""


class Job:
    """One job's state: ``state`` is running, done, cancelled or error; ``done`` of ``total``
    steps; ``result`` when done; ``version`` grows on every change (for streams)."""

    def __init__(self, total: int) -> None:
        self.id = uuid.uuid4().hex[:16]
        self.total, self.done, self.version = total, 0, 0
        self.state = "running"
        self.error: str | None = None
        self.result: dict[str, Any] | None = None
        self._cancel = threading.Event()

    def step(self) -> None:
        """Count one finished step; raise ``JobCancelled`` if the job was cancelled."""
        self.done += 1
        self.version += 1
        if self._cancel.is_set():
            raise JobCancelled

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def finished(self) -> bool:
        return self.state != "running"

    def status(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "done": self.done,
            "total": self.total,
            "error": self.error,
            "result": self.result,
        }


class Jobs:
    """The server's jobs: ``threads`` run at once, the others wait their turn (as running, 0
    steps done); more than ``max_unfinished`` waiting or running is a 429. The last ``keep``
    finished ones are kept for their results."""

    def __init__(
        self,
        threads: int = JOB_THREADS,
        max_unfinished: int = MAX_UNFINISHED,
        keep: int = KEEP_FINISHED,
    ) -> None:
        self.threads, self.max_unfinished, self.keep = threads, max_unfinished, keep
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None  # made by the first job

    def start(self, total: int, work: Callable[[Callable[[], None]], dict[str, Any]]) -> Job:
        """Run ``work(step)`` in a job thread; ``step()`` counts progress and stops a
        cancelled job."""
        job = Job(total)
        with self._lock:
            running = sum(not j.finished for j in self._jobs.values())
            if running >= self.max_unfinished:
                raise ApiError(
                    429,
                    f"{running} jobs are running or waiting (the most this server takes); "
                    "cancel one or wait for one to finish.",
                )
            self._jobs[job.id] = job
            finished = [key for key, j in self._jobs.items() if j.finished]
            for key in finished[: max(0, len(finished) - self.keep)]:
                del self._jobs[key]
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.threads, "interp-job")
            self._executor.submit(self._run, job, work)
        return job

    @staticmethod
    def _run(job: Job, work: Callable[[Callable[[], None]], dict[str, Any]]) -> None:
        try:
            job.result = work(job.step)
            job.state = "done"
        except JobCancelled:
            job.state = "cancelled"
        except ApiError as error:
            job.error, job.state = error.message, "error"
        except Exception as error:  # reported to the client; the server keeps serving
            job.error, job.state = f"{type(error).__name__}: {error}", "error"
        job.version += 1

    def get(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise ApiError(404, f"no job {job_id!r}: it never existed or was cleared.")
        return job

    def shutdown(self) -> None:
        """Cancel every running job and wait for their threads (a later job starts new ones)."""
        for job in list(self._jobs.values()):
            job.cancel()
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
