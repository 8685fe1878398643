"""Multiclass decomposition and the one-vs-one vote."""

import numpy as np
import pytest
from joblib import parallel_config
from sklearn.datasets import load_iris

from bsvm_core import KernelSVM, LinearSVM
from bsvm_core.multiclass import REST, binary_problems, ovo_votes, problem_targets


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
