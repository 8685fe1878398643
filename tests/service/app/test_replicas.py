"""Two server processes sharing one registry database and one artifact store, as replicas do.

Each server is a real ``python -m service`` on its own loopback port. They share an SQLite file
(WAL) and a file artifact folder here; ``test_backends`` runs the PostgreSQL + S3 pair in-process.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import struct
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from sklearn.datasets import load_breast_cancer, load_iris

from tests.service.live_server import spawn_service, start_service, stop_process

pytestmark = pytest.mark.slow


class Server:
    """One ``python -m service`` process; ``kill()`` is kill -9."""

    def __init__(self, data_dir: Path, log_dir: Path, **settings: str) -> None:
        self.data_dir, self.settings = data_dir, settings
        self.process, self.url, self.log = start_service(
            spawn_service(data_dir, log_dir, **settings)
        )

    def kill(self) -> None:
        """SIGKILL the server and its process group's training workers."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s (nothing if it has exited)."""
        stop_process(self.process)


IN_CREATE = 0x100
IN_ONLYDIR = 0x01000000
EVENT = struct.Struct("iIII")  # inotify_event: wd, mask, cookie, len (then the name)
TMP_WAIT_S = 0.2
"""How long ``wait_for_save`` waits for the ``.tmp-`` file once the model folder appears."""


def wait_for_save(root: Path, going: Callable[[], bool], timeout: float) -> bool:
    """Block until a save under ``root`` has begun: True; False when ``going()`` turns false or
    ``timeout`` passes first.

    A save begins by making its model folder. Once the folder appears this waits up to
    ``TMP_WAIT_S`` more for the ``.tmp-`` file in it, so that a kill lands while the bytes are
    being written as a rule; but a fast disk can write and rename a 10 MB file before the watch
    on the new folder is in place, so the folder alone already counts as a save under way. The
    kernel tells of both (inotify), and the root is also listed every millisecond. ``going()``
    asks the server over HTTP, and the whole save can happen while it waits for the answer, so
    when it says the job has ended, the events and the root are looked at once more before
    giving up (returning at once missed the save in 3 runs of 6 here, and once in CI).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    assert fd >= 0, os.strerror(ctypes.get_errno())
    known = set(os.listdir(root))
    try:
        assert libc.inotify_add_watch(fd, bytes(root), IN_CREATE | IN_ONLYDIR) >= 0
        began, ended, deadline = False, False, time.monotonic() + timeout
        asked = time.monotonic()
        while time.monotonic() < deadline:
            names: list[bytes] = []
            if select.select([fd], [], [], 0.001)[0]:
                data, offset = os.read(fd, 65536), 0
                while offset < len(data):
                    *_, size = EVENT.unpack_from(data, offset)
                    names.append(data[offset + EVENT.size : offset + EVENT.size + size])
                    offset += EVENT.size + size
            names += [name.encode() for name in set(os.listdir(root)) - known]
            for name in (name.rstrip(b"\0") for name in names):
                if name.startswith(b".tmp-"):
                    return True
                if name.startswith(b"m_") and name.decode() not in known:  # the save began
                    known.add(name.decode())
                    folder = root / name.decode()
                    assert libc.inotify_add_watch(fd, bytes(folder), IN_CREATE) >= 0
                    if any(p.name.startswith(".tmp-") for p in folder.iterdir()):
                        return True
                    began, deadline = True, min(deadline, time.monotonic() + TMP_WAIT_S)
            if ended:  # the job ended while going() asked: the look above was the last
                return began
            if not began and time.monotonic() - asked > 0.2:
                ended, asked = not going(), time.monotonic()
        return began  # the folder appeared but its .tmp- was not seen in time
    finally:
        os.close(fd)


@contextmanager
def started_pair(root: Path) -> Iterator[tuple[Server, Server, dict[str, str]]]:
    """Two servers sharing a registry and an artifact folder under ``root``; stopped at the end."""
    shared = {
        "database_url": f"sqlite:///{root / 'shared' / 'registry.db'}",
        "artifact_url": f"file://{root / 'shared' / 'models'}",
        "signing_key_file": str(root / "shared" / "signing.key"),  # one key for every replica
        "max_queued": "64",
        "train_concurrency": "2",
        "job_lease_s": "3",
        "log_level": "warning",
    }
    (root / "shared").mkdir()
    a = Server(root / "a", root, **shared)
    try:
        b = Server(root / "b", root, **shared)
    except BaseException:
        a.stop()
        raise
    try:
        yield a, b, shared
    finally:
        for server in (a, b):
            server.stop()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server, dict]]:
    """One pair for the tests that leave both servers running (each works under a name of its
    own, and lets its jobs end or cancels them)."""
    with started_pair(tmp_path_factory.mktemp("replicas")) as servers:
        yield servers


@pytest.fixture()
def own_pair(tmp_path: Path) -> Iterator[tuple[Server, Server, dict[str, str]]]:
    """A pair for a test that stops or kills its servers."""
    with started_pair(tmp_path) as servers:
        yield servers


def test_thirty_concurrent_trainings_of_one_name_get_thirty_versions(pair):
    a, b, _ = pair
    X, y = load_iris(return_X_y=True)
    body = {"model_type": "lda", "name": "race", "X": X.tolist(), "y": y.tolist()}

    def train(i: int) -> httpx.Response:
        return httpx.post(f"{(a, b)[i % 2].url}/train", json=body, timeout=300)

    with ThreadPoolExecutor(max_workers=30) as pool:
        answers = list(pool.map(train, range(30)))
    assert [r.status_code for r in answers] == [201] * 30, [r.text for r in answers][:3]
    assert sorted(r.json()["version"] for r in answers) == list(range(1, 31))
    assert len({r.json()["model_id"] for r in answers}) == 30
    for server in (a, b):
        listed = httpx.get(f"{server.url}/models", params={"name": "race", "limit": 100}).json()
        assert listed["total"] == 30


def test_models_aliases_and_jobs_made_on_one_are_seen_on_the_other(pair):
    a, b, _ = pair
    X, y = load_iris(return_X_y=True)
    body = {"model_type": "lda", "name": "shared", "X": X.tolist(), "y": y.tolist()}
    one = httpx.post(f"{a.url}/train", json=body, timeout=120).json()
    two = httpx.post(f"{a.url}/train", json=body, timeout=120).json()
    assert httpx.get(f"{b.url}/models/{one['model_id']}").json()["version"] == 1
    httpx.put(f"{a.url}/models/by-name/shared/aliases/stable", json={"version": 1})
    rows = {"model": "shared@stable", "X": X[:3].tolist()}
    assert httpx.post(f"{b.url}/predict", json=rows).json()["model_id"] == one["model_id"]
    moved = time.monotonic()
    httpx.put(f"{a.url}/models/by-name/shared/aliases/stable", json={"version": 2})
    while httpx.post(f"{b.url}/predict", json=rows).json()["model_id"] != two["model_id"]:
        assert time.monotonic() - moved < 1.0, "the alias move took over 1 s to reach b"
        time.sleep(0.01)
    job = httpx.post(f"{a.url}/train", json={**body, "background": True}).json()
    deadline = time.monotonic() + 120
    while (view := httpx.get(f"{b.url}/jobs/{job['job_id']}").json())["status"] != "succeeded":
        assert view["status"] in ("queued", "running") and time.monotonic() < deadline, view
        time.sleep(0.05)
    listed = httpx.get(f"{b.url}/jobs", params={"name": "shared"}).json()  # sync ones are jobs too
    assert listed["total"] == 3 and job["job_id"] in {j["job_id"] for j in listed["items"]}


def test_jobs_are_cancelled_from_the_other_process(pair):
    a, b, _ = pair
    X, y = load_breast_cancer(return_X_y=True)
    slow = {
        "model_type": "mcmc_svm",
        "name": "slow",
        "background": True,
        "X": X[:, :4].tolist(),
        "y": y.tolist(),
        "params": {"n_draws": 100_000, "burn_in": 10, "n_chains": 1, "random_state": 0},
    }
    ids = [httpx.post(f"{a.url}/train", json=slow).json()["job_id"] for _ in range(5)]
    deadline = time.monotonic() + 60
    while True:  # 2 processes x 2 slots run four; the fifth waits
        views = [httpx.get(f"{b.url}/jobs/{j}").json() for j in ids]
        if sum(v["status"] == "running" for v in views) == 4 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    queued = [v["job_id"] for v in views if v["status"] == "queued"]
    running = [v["job_id"] for v in views if v["status"] == "running"]
    assert len(queued) == 1 and len(running) == 4
    assert httpx.delete(f"{b.url}/jobs/{queued[0]}", timeout=30).json()["status"] == "cancelled"
    for job_id in running:  # the owner, a or b, sees the flag and kills its worker
        assert httpx.delete(f"{b.url}/jobs/{job_id}", timeout=30).json()["status"] == "cancelled"
    assert httpx.get(f"{a.url}/models", params={"name": "slow"}).json()["total"] == 0


def test_kill_9_during_a_save_leaves_no_debris_and_loses_no_acknowledged_model(own_pair, tmp_path):
    a, b, shared = own_pair
    X, y = load_breast_cancer(return_X_y=True)
    big = {  # a ~10 MB artifact: its save takes long enough to be caught in the act
        "model_type": "mcmc_svm",
        "name": "big",
        "X": X.tolist(),
        "y": y.tolist(),
        "params": {"n_draws": 10_000, "burn_in": 10, "n_chains": 4, "random_state": 1},
    }
    # acknowledged before the kill: its size does not matter (a fifth of a second's fit, not five)
    small = {**big, "params": {**big["params"], "n_draws": 500}}
    acknowledged = [httpx.post(f"{a.url}/train", json=small, timeout=300).json()]
    assert acknowledged[0]["name"] == "big" and acknowledged[0]["version"] == 1, acknowledged
    rows = X[::25].tolist()
    before = {
        m["model_id"]: httpx.post(
            f"{b.url}/predict", json={"model": m["model_id"], "X": rows, "outputs": ["decision"]}
        ).json()["decision_function"]
        for m in acknowledged
    }
    models = Path(shared["artifact_url"].removeprefix("file://"))
    b.stop()  # so that a, the one killed, is the one saving
    job = httpx.post(f"{a.url}/train", json={**big, "background": True}).json()

    def running() -> bool:
        return httpx.get(f"{a.url}/jobs/{job['job_id']}").json()["status"] in ("queued", "running")

    # told by the kernel the moment the save begins (polling missed a 20 MB save on a fast disk
    # three times in a row; a watch on the new folder alone missed a 10 MB one), so the kill
    # lands while the bytes are being written as a rule
    caught = wait_for_save(models, running, timeout=300)
    view = httpx.get(f"{a.url}/jobs/{job['job_id']}").json()
    assert caught, f"the job ended before its save was seen (nothing was killed): {view}"
    a.kill()  # mid-write as a rule; on a loaded machine the save may just have finished
    restarted = Server(tmp_path / "a2", tmp_path, **{**shared, "sweep_grace_s": "0"})
    try:
        leftovers = [p for p in models.glob("m_*/*") if p.name.startswith(".tmp-")]
        listed = httpx.get(f"{restarted.url}/models", params={"limit": 1000}).json()["items"]
        known = {m["model_id"] for m in listed}
        on_disk = {p.name for p in models.glob("m_*") if any(p.iterdir())}
        assert leftovers == [] and on_disk <= known
        for model_id, decision in before.items():
            again = httpx.post(
                f"{restarted.url}/predict",
                json={"model": model_id, "X": rows, "outputs": ["decision"]},
            ).json()
            assert again["decision_function"] == decision
        deadline = time.monotonic() + 300  # the killed process's job is run again elsewhere
        while (view := httpx.get(f"{restarted.url}/jobs/{job['job_id']}").json())["status"] in (
            "queued",
            "running",
        ):
            assert time.monotonic() < deadline, view
            time.sleep(0.2)
        assert view["status"] == "succeeded", view
        assert view["model_id"] in {
            m["model_id"]
            for m in httpx.get(f"{restarted.url}/models", params={"name": "big"}).json()["items"]
        }
    finally:
        restarted.stop()
