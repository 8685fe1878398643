"""The collapsed Metropolis moves of the Gibbs sampler, alone, against the pseudo-posterior by
2-D quadrature: each move must leave π(β) invariant by itself (λ and ω integrated out)."""

from __future__ import annotations

import numpy as np
import pytest

from bsvm_core import diagnostics as dg
from bsvm_core.solvers.collapsed_moves import CollapsedMoves

from .test_gibbs import quadrature, quantile_mcse, two_coefficient_problem

CHAINS, SWEEPS, BURN = 4, 12_000, 400


def run_moves(alpha: float, nu: float = 1.0) -> tuple[np.ndarray, CollapsedMoves]:
    """(chains, sweeps, 2) draws of a chain made of the moves only: the scale move and the move of
    the flat intercept (along its learnt direction), no Gibbs step; together they reach the plane."""
    Xt = two_coefficient_problem()
    pen = np.array([False, True])
    mover = CollapsedMoves(Xt, pen, slice(1, 2), alpha, CHAINS, BURN)
    rng = np.random.default_rng(17)
    beta = np.column_stack([np.zeros(CHAINS), np.full(CHAINS, 0.5)])
    margin = beta @ Xt.T
    nus = np.full(CHAINS, nu)
    out = np.empty((CHAINS, SWEEPS, 2))
    for sweep in range(BURN + SWEEPS):
        z = rng.standard_normal((CHAINS, mover.n_normals))
        u = rng.random((CHAINS, mover.n_uniforms))
        mover.step(beta, margin, nus, z, u, sweep if sweep < BURN else -1)
        if sweep >= BURN:
            out[:, sweep - BURN] = beta
    np.testing.assert_allclose(margin, beta @ Xt.T, rtol=1e-9, atol=1e-9)  # margins kept up
    return out, mover


def assert_matches_quadrature(draws: np.ndarray, ref: dict) -> None:
    """Each coefficient's chains (chains, sweeps, 2) converged, and their mean and 5 % / 95 %
    quantiles within 4 Monte Carlo standard errors of the quadrature ``ref``."""
    for j in range(2):
        chains = draws[:, :, j]
        assert dg.rhat_rank(chains) < 1.01
        mcse = chains.std() / np.sqrt(dg.ess_bulk(chains))
        assert abs(chains.mean() - ref[f"mean{j}"]) < 4 * mcse, (j, chains.mean(), mcse)
        for p, q_ref, dens in zip((0.05, 0.95), ref[f"q{j}"], ref[f"density{j}"], strict=True):
            q = np.quantile(chains, p)
            tol = 4 * quantile_mcse(chains, q_ref, p, dens)
            assert abs(q - q_ref) < tol, (j, p, q, q_ref, tol)


@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_moves_alone_match_quadrature(alpha: float) -> None:
    ref = quadrature(alpha, 1.0, False)
    draws, mover = run_moves(alpha)
    # the intercept's direction was learnt in burn-in: (1, Cov(β1, β0)/Var(β0)), not e0
    assert np.all(mover.dirs[0, :, 0] == 1.0) and np.all(mover.dirs[0, :, 1] != 0.0)
    assert_matches_quadrature(draws, ref)


def test_moves_do_not_adapt_after_burn_in() -> None:
    """After burn-in (adapt = −1) the kernel is fixed: step sizes and directions do not change."""
    Xt = two_coefficient_problem()
    mover = CollapsedMoves(Xt, np.array([False, True]), slice(1, 2), 1.0, 2, 0)
    rng = np.random.default_rng(0)
    beta = rng.normal(size=(2, 2))
    margin = beta @ Xt.T
    steps, dirs = mover.log_step.copy(), mover.dirs.copy()
    for _ in range(50):
        mover.step(beta, margin, np.ones(2), rng.normal(size=(2, 2)), rng.random((2, 2)), -1)
    np.testing.assert_array_equal(mover.log_step, steps)
    np.testing.assert_array_equal(mover.dirs, dirs)


@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_independence_move_alone_matches_quadrature(alpha: float) -> None:
    """Only the independence move, from a deliberately poor Gaussian (shifted, too narrow along
    one axis, wrongly correlated): the acceptance ratio, not the proposal, must make it exact."""
    ref = quadrature(alpha, 1.0, False)
    Xt = two_coefficient_problem()
    tries, sweeps = 3, 20_000
    mover = CollapsedMoves(Xt, np.array([False, True]), slice(1, 2), alpha, CHAINS, 0, tries)
    mean = np.array([ref["mean0"] + 0.3, ref["mean1"] - 0.2])
    cov = np.array([[0.5, 0.1], [0.1, 0.15]])
    count = 1000
    mover.sum[:] = count * mean
    mover.sum_sq[:] = (count - 1) * cov + count * np.outer(mean, mean)
    mover._fit_proposal(count)
    assert mover.active.all()
    rng = np.random.default_rng(5)
    beta = np.tile(mean, (CHAINS, 1))
    margin = beta @ Xt.T
    nus = np.ones(CHAINS)
    out = np.empty((CHAINS, sweeps, 2))
    for sweep in range(sweeps):
        log_target = -2.0 * mover._hinge(margin) - mover._prior(beta, nus)
        z = rng.standard_normal((CHAINS, tries * 2))
        mover._independence(beta, margin, nus, log_target, z, rng.random((CHAINS, tries)))
        out[:, sweep] = beta
    np.testing.assert_allclose(margin, beta @ Xt.T, rtol=1e-9, atol=1e-9)
    assert_matches_quadrature(out, ref)


def test_independence_proposal_is_fitted_at_the_end_of_burn_in() -> None:
    """The proposal is the Gaussian of the draws of sweeps [B/10, B), set once, then fixed."""
    Xt = two_coefficient_problem()
    burn = 100
    mover = CollapsedMoves(Xt, np.array([False, True]), slice(1, 2), 1.0, 2, burn)
    rng = np.random.default_rng(3)
    beta = np.column_stack([np.zeros(2), np.full(2, 0.5)])
    margin = beta @ Xt.T
    seen = []
    for sweep in range(burn + 50):
        z, u = rng.standard_normal((2, mover.n_normals)), rng.random((2, mover.n_uniforms))
        mover.step(beta, margin, np.ones(2), z, u, sweep if sweep < burn else -1)
        if burn // 10 <= sweep < burn:
            seen.append(beta.copy())
        if sweep == burn - 1:
            fitted = (mover.mean.copy(), mover.chol.copy())
    seen_arr = np.stack(seen, axis=1)  # (chains, draws, 2)
    for c in range(2):
        np.testing.assert_allclose(fitted[0][c], seen_arr[c].mean(axis=0), rtol=1e-10)
        chol = fitted[1][c]
        np.testing.assert_allclose(chol @ chol.T, np.cov(seen_arr[c].T), rtol=1e-8)
    np.testing.assert_array_equal(mover.mean, fitted[0])
    np.testing.assert_array_equal(mover.chol, fitted[1])
