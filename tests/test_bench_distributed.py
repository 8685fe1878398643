"""``bench.bench_distributed --quick``: the table is printed and the models trained by reference
equal the in-memory fits of the same rows (a smoke run on local files, without the dask-ml anchor)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("distributed")

from bench import bench_distributed

pytestmark = pytest.mark.slow


def test_quick_run_prints_the_table_and_matches_in_memory(tmp_path: Path) -> None:
    argv = ["--quick", "--sources", "local", "--no-dask-ml", "--data-dir", str(tmp_path)]
    rows = bench_distributed.run(bench_distributed.parse_args(argv))
    out = bench_distributed.report(rows)
    assert "| rows | source | what | time (s) |" in out
    assert "Goals (issue 25):" in out
    for model_type in bench_distributed.MODELS:
        assert f"| 100,000 | local | {model_type} by reference |" in out
    assert "| 100,000 | local | batch scoring (linear_svm) |" in out
    assert "OUTSIDE" not in out and "FAILED" not in out
    trained = [r for r in rows if r.what.endswith("by reference")]
    assert len(trained) == len(bench_distributed.MODELS)
    for row in trained:
        assert row.data["within_tolerance"], row.note
        rel = row.data["objective_rel"]
        assert rel is None or abs(rel) <= bench_distributed.OBJECTIVE_RTOL
        assert row.data["coef_diff"] <= bench_distributed.COEF_ATOL
        assert row.rss["server"] > 0 and all(w > 0 for w in row.rss["workers"])
    assert next(tmp_path.glob("rows-100000-*/_COMPLETE")).exists()  # reruns reuse the shards
