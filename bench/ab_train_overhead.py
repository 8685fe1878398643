"""A synchronous ``POST /train``'s overhead, two checkouts side by side, request by request.

``bench_train_overhead`` times one checkout per run; on a shared machine the load moves between
two runs by more than the difference looked for. Here both checkouts serve at once (each its own
instrumented server, ``bench_train_overhead --serve``, started from its own tree), and every
training goes to one and then the other (the order flipped every round), with the fit alone
timed in this process in between: both meet the same minutes' load. Run::

    .venv/bin/python -m bench.ab_train_overhead --a /path/to/main --b . [--rounds 21]

Note: each server's next training comes after the other's, so a warm worker has that long to be
replaced; a client posting back to back (``bench_train_overhead``) does not leave it that time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
from sklearn.datasets import load_breast_cancer

from bench.bench_train_overhead import bodies, fit_alone, one_training
from tests.service.live_server import server_env, start_service

SHOWN = ("save", "worker start", "result back", "evaluate", "job row + hand-off", "answer")


def start(tree: Path, data_dir: Path) -> tuple[subprocess.Popen, str]:
    """The instrumented server of checkout ``tree`` on ``data_dir``; (process, base URL)."""
    data_dir.mkdir(parents=True, exist_ok=True)

    def spawn(port: int) -> tuple[subprocess.Popen, Path]:
        env = server_env(data_dir, port, log_level="warning")
        env.update(OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(tree))
        log = data_dir / f"server-{port}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [sys.executable, "-m", "bench.bench_train_overhead", "--serve"],
                cwd=tree,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        return process, log

    process, url, _ = start_service(spawn)
    return process, url


def main(argv: list[str] | None = None) -> int:
    """Start both servers, alternate the trainings, print the medians side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True, help="the reference checkout")
    parser.add_argument("--b", type=Path, required=True, help="the checkout compared with it")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--models", nargs="+", default=["kernel_svm", "lda", "em_svm"])
    args = parser.parse_args(argv)
    trees = {"a": args.a.resolve(), "b": args.b.resolve()}
    X, y = load_breast_cancer(return_X_y=True)
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        servers = {k: start(tree, Path(tmp) / k) for k, tree in trees.items()}
        try:
            clients = {
                k: httpx.Client(base_url=url, timeout=300) for k, (_, url) in servers.items()
            }
            print("| training | a | b | b / a | " + " | ".join(f"{s} a / b" for s in SHOWN) + " |")
            print("|---|---:|---:|---:|" + "---:|" * len(SHOWN))
            for model_type in args.models:
                fit_alone(model_type, X, y)
                for kind, (body, headers, query) in bodies(model_type, X, y).items():
                    for client in clients.values():  # warm both servers' first calls
                        one_training(client, body, headers, query)
                    over: dict[str, list[float]] = {k: [] for k in trees}
                    runs: dict[str, list[dict]] = {k: [] for k in trees}
                    for r in range(args.rounds):
                        for k in list(trees) if r % 2 == 0 else list(trees)[::-1]:
                            run = one_training(clients[k], body, headers, query)
                            alone = 1e3 * fit_alone(model_type, X, y)
                            over[k].append(run["client total"] - alone)
                            runs[k].append(run)
                        loads.append(os.getloadavg()[0])
                    a, b = (statistics.median(over[k]) for k in trees)
                    stages = [
                        "{:.1f} / {:.1f}".format(
                            *(statistics.median(x[s] for x in runs[k]) for k in trees)
                        )
                        for s in SHOWN
                    ]
                    print(
                        f"| {model_type} {kind} | {a:.1f} | {b:.1f} | {b / a:.2f} | "
                        + " | ".join(stages)
                        + " |",
                        flush=True,
                    )
        finally:
            for process, _ in servers.values():
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
    print(
        f"\nclient − fit alone, medians of {args.rounds} (ms); load average "
        f"{min(loads):.2f}-{max(loads):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
