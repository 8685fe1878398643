"""Multiclass decomposition and the one-vs-one vote."""

import numpy as np
import pytest
from joblib import parallel_config
from sklearn.datasets import load_iris

from bsvm_core import KernelSVM, LinearSVM
from bsvm_core.multiclass import (
    REST,
    binary_problems,
    certain_labels,
    label_index,
    ovo_votes,
    problem_targets,
    sure_label,
    sure_labels,
    two_class_targets,
    vote_matrix,
)


def test_problems_per_scheme() -> None:
    assert binary_problems(2, "ovo") == [(1, 0)]
    assert binary_problems(3, "ovr") == [(0, REST), (1, REST), (2, REST)]
    assert binary_problems(3, "ovo") == [(1, 0), (2, 0), (2, 1)]
    with pytest.raises(ValueError, match="multiclass"):
        binary_problems(3, "crammer")


def test_problem_targets() -> None:
    y = np.array([0, 1, 2, 1, 0])
    mask, t = problem_targets(y, (2, 1))
    assert mask.tolist() == [False, True, True, True, False]
    assert t.tolist() == [-1.0, 1.0, -1.0]
    mask, t = problem_targets(y, (0, REST))
    assert mask.all() and t.tolist() == [1.0, -1.0, -1.0, -1.0, 1.0]


def test_votes_dominate_and_ties_go_to_confidence() -> None:
    problems = binary_problems(3, "ovo")  # (1,0), (2,0), (2,1)
    # a cycle: 1 beats 0 weakly, 0 beats 2 strongly, 2 beats 1 weakly -> one vote each; 0 most confident
    D = np.array([[0.1, -2.0, 0.1]])
    scores = ovo_votes(D, problems, 3)
    assert np.argmax(scores[0]) == 0
    # a clear majority wins whatever the confidences
    D = np.array([[5.0, -0.1, -0.1]])  # 1 beats 0 and 1 beats 2; 0 beats 2
    assert np.argmax(ovo_votes(D, problems, 3)[0]) == 1


@pytest.mark.parametrize(
    "make",
    [
        lambda n_jobs: KernelSVM(probability=True, random_state=0, n_jobs=n_jobs),
        lambda n_jobs: LinearSVM(multiclass="ovo", probability=True, random_state=0, n_jobs=n_jobs),
    ],
    ids=["kernel_ovo", "linear_ovo"],
)
def test_parallel_problems_and_folds_give_the_sequential_fit(make) -> None:
    X, y = load_iris(return_X_y=True)
    sequential = make(None).fit(X, y)
    with parallel_config(backend="threading"):
        parallel = make(2).fit(X, y)
    np.testing.assert_array_equal(parallel.decision_function(X), sequential.decision_function(X))
    np.testing.assert_array_equal(parallel.predict_proba(X), sequential.predict_proba(X))
    assert parallel.platt_ == sequential.platt_ and len(parallel.platt_) == 3


@pytest.mark.parametrize(
    ("n_classes", "scheme"), [(2, "ovr"), (3, "ovr"), (5, "ovr"), (3, "ovo"), (5, "ovo")]
)
def test_sure_labels_certify_the_rows_certain_labels_does_with_label_index_labels(
    n_classes: int, scheme: str
) -> None:
    problems = binary_problems(n_classes, scheme)
    rng = np.random.default_rng(n_classes)
    D = rng.normal(size=(400, len(problems)))
    D[::5, 0] = rng.choice([0.0, 1e-12, -1e-12], size=D[::5].shape[0])  # near a pairwise tie
    D[1::7, -1] = D[1::7, 0]  # equal top values
    D[2::11, 1 % D.shape[1]] = np.nan
    D[3::13] = np.round(D[3::13])  # ties in votes and values
    error = rng.uniform(0, 1e-9, D.shape)
    labels, certain = certain_labels(D, error, problems, n_classes)
    nan = np.isnan(D).any(axis=1)
    certain &= ~nan  # a NaN (an overflow) is never sure (certain_labels may pass it)
    for votes in (None, vote_matrix(problems, n_classes)):
        fast, sure = sure_labels(D, error, problems, n_classes, votes)
        np.testing.assert_array_equal(sure, certain)
        np.testing.assert_array_equal(fast[sure], label_index(D, problems, n_classes)[sure])
    assert 0.2 < certain.mean() < 1.0
    for row, e, k, ok in zip(D, error, labels, certain, strict=True):
        assert sure_label(row.tolist(), e.tolist(), problems, n_classes) == (k if ok else None)


def test_problem_targets_from_class_masks_are_the_plain_ones() -> None:
    """Targets made from ``members`` (each class's rows, made once) equal the per-problem ones,
    and are the ±1 of membership in the positive class."""
    y = np.random.default_rng(3).integers(0, 4, 60)
    members = y == np.arange(4)[:, None]
    for problem in binary_problems(4, "ovo") + binary_problems(4, "ovr"):
        mask, t = problem_targets(y, problem)
        mask_m, t_m = problem_targets(y, problem, members)
        np.testing.assert_array_equal(mask_m, mask)
        assert t_m.dtype == np.float64 and t_m.tobytes() == t.tobytes()
        np.testing.assert_array_equal(t, np.where(y[mask] == problem[0], 1.0, -1.0))


def test_two_class_targets_from_class_masks_are_the_plain_ones() -> None:
    """With two classes every row is in the one problem: the mask is all rows, the targets the
    plain ones."""
    y = np.random.default_rng(4).integers(0, 2, 50)
    members = y == np.arange(2)[:, None]
    for problem in binary_problems(2, "ovo"):
        mask, t = problem_targets(y, problem)
        mask_m, t_m = problem_targets(y, problem, members)
        assert mask_m.all() and mask_m.dtype == bool
        np.testing.assert_array_equal(mask_m, mask)
        assert t_m.dtype == np.float64 and t_m.tobytes() == t.tobytes()
        np.testing.assert_array_equal(t_m, np.where(y == problem[0], 1.0, -1.0))
        mask_2, t_2 = two_class_targets(y)
        np.testing.assert_array_equal(mask_2, mask)
        assert mask_2.dtype == bool and t_2.dtype == np.float64 and t_2.tobytes() == t.tobytes()
