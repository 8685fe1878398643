"""The dispatcher's care of the jobs' leases: renew this process's, re-queue the lost, forget the old.

Every tick (``queue.TICK_S``) the dispatcher calls ``heartbeat`` with the jobs this process runs
and then ``reap``. Leases are renewed, and expired ones looked for, a fifth of a lease apart (at
most 1 s); cancel flags are read every tick, so a ``DELETE /jobs/{id}`` on any process acts at
once. Why a job is re-queued once and then failed: ``queue``'s module docstring.
"""

from __future__ import annotations

import logging
import threading
import time

from service.errors import TrainingAbandoned
from service.repository.jobs import JobStore
from service.settings import Settings
from service.training.finishing import Running

logger = logging.getLogger("service.training.queue")

MAX_ATTEMPTS = 2
"""Times a job may lose its process before it is failed (``TRAINING_ABANDONED``)."""
PURGE_EVERY_S = 10.0


class LeaseUpkeep:
    """Leases, cancel flags, expired jobs and the purge of ended ones, for one process."""

    def __init__(
        self, settings: Settings, job_store: JobStore, owner: str, wake: threading.Event
    ) -> None:
        self.settings = settings
        self.job_store = job_store
        self.owner = owner
        self.wake = wake
        """Set when expired jobs were queued again (the dispatcher claims them at once)."""
        self.renew_every = min(settings.job_lease_s / 5, 1.0)
        self._last_purge = self._last_reap = self._last_renewal = 0.0

    def heartbeat(self, mine: list[Running]) -> None:
        """Renew the leases of ``mine`` (this process's jobs), write their progress, and pick up
        cancel flags set anywhere; a job re-queued elsewhere or purged is marked lost."""
        if not mine:
            return
        now = time.time()
        if now - self._last_renewal >= self.renew_every:
            self._last_renewal = now
            lease = now + self.settings.job_lease_s
            self.job_store.renew(
                self.owner,
                {r.job_id: r.progress for r in mine},
                lease,
                {r.job_id: r.detail for r in mine if r.detail is not None},
            )
        # cancel flags are read every tick: a cancel acts at once
        state = self.job_store.states([r.job_id for r in mine])
        for running in mine:
            row = state.get(running.job_id)
            if row is None or row.owner != self.owner or row.status != "running":
                running.lost = True  # re-queued elsewhere after our lease expired, or purged
                running.cancel.set()
            elif row.cancel_requested:
                running.cancel.set()

    def reap(self) -> None:
        """Re-queue (or fail) jobs whose owner stopped renewing; forget old finished jobs."""
        now = time.time()
        if now - self._last_reap < self.renew_every:
            return
        self._last_reap = now
        expired = self.job_store.requeue_expired(now, MAX_ATTEMPTS)
        if expired is None:
            self._purge(now)
            return
        requeued, abandoned = expired
        if requeued:
            logger.warning("%d training jobs lost their process and were queued again", requeued)
            self.wake.set()
        for job_id in abandoned:
            self.job_store.finish_if(
                job_id,
                "running",
                "failed",
                TrainingAbandoned(
                    f"the server process running this training stopped {MAX_ATTEMPTS} times "
                    "(see its log); the training was given up, send it again or with less work"
                ),
            )
        self._purge(now)

    def _purge(self, now: float) -> None:
        """Forget jobs that ended more than ``job_ttl_s`` ago (at most every ``PURGE_EVERY_S``)."""
        if now - self._last_purge > min(PURGE_EVERY_S, self.settings.job_ttl_s / 2):
            self._last_purge = now
            self.job_store.purge(now - self.settings.job_ttl_s)
