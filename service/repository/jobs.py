"""Jobs in the database (trainings and batch scorings): the rows ``service.training.queue`` dispatches.

A job row goes ``queued → running → succeeded | failed | cancelled``; its task (``job_payloads``)
is deleted when it ends, and so is the fitted model a failed save left in ``job_results`` (kept
there while the save is retried, so that the process that takes the job over after a crash stores
it instead of fitting again). Every change of status is a compare-and-set ``UPDATE ... WHERE status =
expected``, so one job has one owner and ends once, whichever process gets there first. A running
job belongs to the process whose lease (``lease_expires``, epoch seconds) it holds.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from service.errors import ApiError, Busy, Conflict, detail
from service.repository.database import Database
from service.repository.registry import now_iso
from service.repository.tables import job_payloads, job_results, jobs, models

JOB_ID_PATTERN = r"^j_[0-9a-f]{32}$"
_JOB_ID_RE = re.compile(JOB_ID_PATTERN)
RETRY_AFTER_S = 5


def _active_holder(conn: Connection, target: str) -> str | None:
    """The id of the queued or running job whose ``target`` is ``target``, if any."""
    found = conn.execute(
        select(jobs.c.job_id).where(
            jobs.c.target == target, jobs.c.status.in_(("queued", "running"))
        )
    ).first()
    return None if found is None else str(found[0])


def _target_taken(target: str, holder: str) -> Conflict:
    """409 naming ``output.uri``: another active job writes to ``target``."""
    return Conflict(
        "another job is writing to this output",
        [
            detail(
                "output.uri",
                f"job {holder} is writing to {target}; wait until it ends (GET /jobs/{holder}) "
                "or choose another prefix",
            )
        ],
    )


def new_job_id() -> str:
    """A fresh job id (matches ``JOB_ID_PATTERN``)."""
    return f"j_{uuid.uuid4().hex}"


#: Job rows with the version of the model a job stored (null until then, or once it is deleted).
JOB_VIEWS = select(jobs, models.c.version).select_from(
    jobs.outerjoin(models, jobs.c.model_id == models.c.model_id)
)


def view_of(row: Any) -> dict[str, Any]:
    """The public fields of a ``JOB_VIEWS`` row (``JobView``)."""
    return {
        "job_id": row.job_id,
        "kind": row.kind,
        "status": row.status,
        "progress": round(float(row.progress), 4),
        "progress_detail": json.loads(row.progress_detail) if row.progress_detail else None,
        "model_type": row.model_type,
        "name": row.name,
        "model_id": row.model_id,
        "version": row.version,
        "error": json.loads(row.error) if row.error else None,
        "result": json.loads(row.result) if row.result else None,
        "created_at": row.created_at,
        "started_at": row.started_at,
        "finished_at": row.finished_at,
    }


def _error_json(error: ApiError) -> str:
    return json.dumps(
        {
            "code": error.code,
            "message": error.message,
            "details": [d.model_dump() for d in error.details],
        }
    )


class JobLost(Exception):
    """The job is no longer this owner's running job (taken over, cancelled or purged)."""


class JobStore:
    """Reads and writes the ``jobs`` and ``job_payloads`` tables (every query of the job queue)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- reading -------------------------------------------------------------------------------
    def get(self, job_id: str) -> dict[str, Any] | None:
        """The view of ``job_id``, or None when there is no such job."""
        if not _JOB_ID_RE.fullmatch(job_id):
            return None
        with self.db.read() as conn:
            row = conn.execute(JOB_VIEWS.where(jobs.c.job_id == job_id)).first()
        return None if row is None else view_of(row)

    def list(
        self, status: str | None, name: str | None, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """A page of jobs, newest first, filtered by status and name; and the total."""
        where = []
        if status is not None:
            where.append(jobs.c.status == status)
        if name is not None:
            where.append(jobs.c.name == name)
        with self.db.read() as conn:
            total = conn.execute(select(func.count()).select_from(jobs).where(*where)).scalar()
            rows = conn.execute(
                JOB_VIEWS.where(*where)
                .order_by(jobs.c.created_at.desc(), jobs.c.job_id)
                .limit(limit)
                .offset(offset)
            ).all()
        return [view_of(r) for r in rows], int(total or 0)

    def states(self, job_ids: list[str]) -> dict[str, Any]:
        """``job_id → (job_id, cancel_requested, owner, status)`` of the jobs that still exist."""
        with self.db.read() as conn:
            rows = conn.execute(
                select(jobs.c.job_id, jobs.c.cancel_requested, jobs.c.owner, jobs.c.status).where(
                    jobs.c.job_id.in_(job_ids)
                )
            ).all()
        return {r.job_id: r for r in rows}

    # -- queueing and claiming -----------------------------------------------------------------
    def add(
        self,
        job_id: str,
        model_type: str,
        name: str,
        data: bytes,
        max_queued: int,
        kind: str = "train",
        model_id: str | None = None,
        claim: tuple[str, float] | None = None,
        target: str | None = None,
        durable: bool = True,
    ) -> bool:
        """Queue a job of ``kind`` with its task ``data`` (429 when ``max_queued`` jobs wait).

        ``claim``, ``(owner, lease_s)``: when no other job is queued, the job is inserted
        already claimed by ``owner`` (as ``claim_oldest`` would have claimed it, the oldest
        queued job, in the same transaction). True when it was claimed so.
        ``target``: where the job writes (a batch job's output prefix); 409 while another queued
        or running job holds it (``uq_jobs_active_target`` settles a race between processes).
        ``durable=False``: the commit does not wait for its flush (``Database.write``), for a
        job whose client waits for its end (a synchronous training: nothing is answered before
        the durable commit that ends it).
        """
        try:
            with self.db.write(durable=durable) as conn:
                if target is not None:
                    holder = _active_holder(conn, target)
                    if holder is not None:
                        raise _target_taken(target, holder)
                waiting = int(
                    conn.execute(
                        select(func.count()).select_from(jobs).where(jobs.c.status == "queued")
                    ).scalar()
                    or 0
                )
                if waiting >= max_queued:
                    raise Busy(
                        f"{waiting} jobs are waiting (BSVM_MAX_QUEUED); retry later",
                        headers={"Retry-After": str(RETRY_AFTER_S)},
                    )
                now = now_iso()
                values: dict[str, Any] = {"status": "queued", "progress": 0.0, "attempts": 0}
                claimed = claim is not None and waiting == 0
                if claim is not None and claimed:
                    owner, lease_s = claim
                    values = {
                        "status": "running",
                        "owner": owner,
                        "lease_expires": time.time() + lease_s,
                        "attempts": 1,
                        "started_at": now,
                        "progress": 0.05,
                    }
                conn.execute(
                    insert(jobs).values(
                        job_id=job_id,
                        kind=kind,
                        model_id=model_id,
                        model_type=model_type,
                        name=name,
                        cancel_requested=False,
                        created_at=now,
                        target=target,
                        **values,
                    )
                )
                conn.execute(insert(job_payloads).values(job_id=job_id, data=data))
        except IntegrityError:  # another process took the target after the check above
            holder = self.holder_of(target) if target is not None else None
            if holder is None:
                raise
            raise _target_taken(target, holder) from None
        return claimed

    def holder_of(self, target: str) -> str | None:
        """The queued or running job that writes to ``target``, if any."""
        with self.db.read() as conn:
            return _active_holder(conn, target)

    def claim_oldest(self, owner: str, lease_s: float) -> tuple[str, bytes | None, str] | None:
        """Take the oldest queued job for ``owner``: its id, task and kind; None when none is
        queued."""
        while True:
            with self.db.read() as conn:
                job_id = conn.execute(
                    select(jobs.c.job_id)
                    .where(jobs.c.status == "queued")
                    .order_by(jobs.c.created_at, jobs.c.job_id)
                    .limit(1)
                ).scalar()
            if job_id is None:
                return None
            with self.db.write() as conn:
                claimed = conn.execute(
                    update(jobs)
                    .where(and_(jobs.c.job_id == job_id, jobs.c.status == "queued"))
                    .values(
                        status="running",
                        owner=owner,
                        lease_expires=time.time() + lease_s,
                        attempts=jobs.c.attempts + 1,
                        started_at=now_iso(),
                        progress=0.05,
                        cancel_requested=False,
                    )
                ).rowcount
                if claimed:
                    data = conn.execute(
                        select(job_payloads.c.data).where(job_payloads.c.job_id == job_id)
                    ).scalar()
                    kind = conn.execute(select(jobs.c.kind).where(jobs.c.job_id == job_id)).scalar()
                    return job_id, data, str(kind or "train")
            # another process took it first: look for the next one

    def renew(
        self,
        owner: str,
        progress: dict[str, float],
        lease_expires: float,
        details: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """Extend ``owner``'s lease on each running job of ``progress`` and write its progress
        (and its ``details`` entry, when it has one)."""
        details = details or {}
        with self.db.write() as conn:
            for job_id, fraction in progress.items():
                values: dict[str, Any] = {"lease_expires": lease_expires, "progress": fraction}
                if job_id in details:
                    values["progress_detail"] = json.dumps(details[job_id])
                conn.execute(
                    update(jobs)
                    .where(and_(jobs.c.job_id == job_id, jobs.c.owner == owner))
                    .where(jobs.c.status == "running")
                    .values(**values)
                )

    def request_cancel(self, job_id: str) -> None:
        """Raise the cancel flag of a running job (its owner reads it on its next tick)."""
        with self.db.write() as conn:
            conn.execute(
                update(jobs)
                .where(and_(jobs.c.job_id == job_id, jobs.c.status == "running"))
                .values(cancel_requested=True)
            )

    # -- ending --------------------------------------------------------------------------------
    def finish_if(
        self,
        job_id: str,
        expected: str,
        status: str,
        error: ApiError | None = None,
        model_id: str | None = None,
        result: dict[str, Any] | None = None,
        detail: dict[str, Any] | None = None,
    ) -> bool:
        """Move ``job_id`` from ``expected`` to a final ``status`` (with its error, or the model
        it stored or the ``result`` it gave: progress 1; and its last progress ``detail``);
        False when it was not there."""
        values: dict[str, Any] = {
            "status": status,
            "finished_at": now_iso(),
            "ended": time.time(),
            "lease_expires": None,
        }
        if model_id is not None:
            values.update(model_id=model_id, progress=1.0)
        if result is not None:
            values.update(result=json.dumps(result), progress=1.0)
        if error is not None:
            values["error"] = _error_json(error)
        if detail is not None:
            values["progress_detail"] = json.dumps(detail)
        with self.db.write() as conn:
            done = conn.execute(
                update(jobs)
                .where(and_(jobs.c.job_id == job_id, jobs.c.status == expected))
                .values(**values)
            ).rowcount
            if done:
                self._drop_task(conn, job_id)
        return bool(done)

    @staticmethod
    def _drop_task(conn: Connection, job_id: str) -> None:
        """Delete what an ended job no longer needs: its task and any kept model."""
        conn.execute(delete(job_payloads).where(job_payloads.c.job_id == job_id))
        conn.execute(delete(job_results).where(job_results.c.job_id == job_id))

    def finish_saved(
        self,
        conn: Connection,
        job_id: str,
        owner: str,
        model_id: str,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """In the transaction that adds the model row: ``owner``'s running job ends ``succeeded``
        with ``model_id`` (and its last progress ``detail``); JobLost (rolling the row back) when
        it is not ``owner``'s any more."""
        extra = {} if detail is None else {"progress_detail": json.dumps(detail)}
        done = conn.execute(
            update(jobs)
            .where(and_(jobs.c.job_id == job_id, jobs.c.status == "running"))
            .where(jobs.c.owner == owner)
            .values(
                status="succeeded",
                finished_at=now_iso(),
                ended=time.time(),
                lease_expires=None,
                model_id=model_id,
                progress=1.0,
                **extra,
            )
        ).rowcount
        if not done:
            raise JobLost(job_id)
        self._drop_task(conn, job_id)

    # -- fitted models whose save is retried ---------------------------------------------------
    def keep_result(
        self, job_id: str, owner: str, model_id: str, record: dict[str, Any], data: bytes
    ) -> bool:
        """Keep a fitted model in ``owner``'s running job (once); False when not its job."""
        with self.db.write() as conn:
            mine = conn.execute(
                select(jobs.c.job_id)
                .where(and_(jobs.c.job_id == job_id, jobs.c.status == "running"))
                .where(jobs.c.owner == owner)
            ).first()
            if mine is None:
                return False
            held = conn.execute(
                select(job_results.c.job_id).where(job_results.c.job_id == job_id)
            ).first()
            if held is None:
                conn.execute(
                    insert(job_results).values(
                        job_id=job_id,
                        model_id=model_id,
                        record=json.dumps(record),
                        data=data,
                        stored_at=time.time(),
                    )
                )
        return True

    def kept_result(self, job_id: str) -> tuple[str, dict[str, Any], bytes] | None:
        """The fitted model kept in ``job_id``: its model id, record and bytes; None if none."""
        with self.db.read() as conn:
            row = conn.execute(select(job_results).where(job_results.c.job_id == job_id)).first()
        return None if row is None else (row.model_id, json.loads(row.record), bytes(row.data))

    def ended_with(self, job_id: str) -> tuple[str, str | None] | None:
        """``(status, model_id)`` of ``job_id``; None when it does not exist."""
        with self.db.read() as conn:
            row = conn.execute(
                select(jobs.c.status, jobs.c.model_id).where(jobs.c.job_id == job_id)
            ).first()
        return None if row is None else (row.status, row.model_id)

    # -- lost owners and old jobs --------------------------------------------------------------
    def requeue_expired(self, now: float, max_attempts: int) -> tuple[int, list[str]] | None:
        """Queue again the running jobs whose lease expired before ``now`` and that were tried
        fewer than ``max_attempts`` times: how many, and the ids of the others (to be failed).
        None when no lease expired (then no write lock is taken)."""
        expired = and_(jobs.c.status == "running", jobs.c.lease_expires < now)
        with self.db.read() as conn:  # the common case: nothing expired, and no write lock taken
            any_expired = conn.execute(select(jobs.c.job_id).where(expired).limit(1)).first()
        if any_expired is None:
            return None
        with self.db.write() as conn:
            requeued = conn.execute(
                update(jobs)
                .where(and_(expired, jobs.c.attempts < max_attempts))
                .values(
                    status="queued",
                    owner=None,
                    lease_expires=None,
                    progress=0.0,
                    progress_detail=None,
                )
            ).rowcount
            abandoned = conn.execute(
                select(jobs.c.job_id).where(and_(expired, jobs.c.attempts >= max_attempts))
            ).all()
        return requeued, [job_id for (job_id,) in abandoned]

    def purge(self, horizon: float) -> None:
        """Forget the jobs that ended before ``horizon`` (epoch seconds)."""
        ended = and_(jobs.c.ended.is_not(None), jobs.c.ended < horizon)
        with self.db.write() as conn:
            old = select(jobs.c.job_id).where(ended)
            conn.execute(delete(job_payloads).where(job_payloads.c.job_id.in_(old)))
            conn.execute(delete(job_results).where(job_results.c.job_id.in_(old)))
            conn.execute(delete(jobs).where(ended))

    def release(self, owner: str) -> None:
        """Put ``owner``'s running jobs back in the queue (a clean stop is not a lost attempt)."""
        with self.db.write() as conn:
            conn.execute(
                update(jobs)
                .where(and_(jobs.c.owner == owner, jobs.c.status == "running"))
                .values(
                    status="queued",
                    owner=None,
                    lease_expires=None,
                    progress=0.0,
                    progress_detail=None,
                    attempts=jobs.c.attempts - 1,
                )
            )
