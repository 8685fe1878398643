"""Gibbs sampler of the Polson-Scott SVM against the pseudo-posterior by 2-D quadrature."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from scipy import linalg

from bsvm_core import diagnostics as dg
from bsvm_core.solvers.bayes_gibbs import penalised_selector, run_gibbs, run_gibbs_chains
from bsvm_core.solvers.gaussian_draw import CholeskyWorkspace, draw_fast

A_NU, B_NU = 1.0, 1.0
CHAINS, DRAWS, BURN = 4, 2500, 300


def two_coefficient_problem(n: int = 30, seed: int = 3) -> np.ndarray:
    """Rows y_i (1, x_i): an intercept (flat prior) and one standardised, overlapping predictor."""
    rng = np.random.default_rng(seed)
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    x = rng.normal(size=n) + 0.8 * y
    x = (x - x.mean()) / x.std()
    return y[:, None] * np.column_stack([np.ones(n), x])


@cache
def quadrature(alpha: float, nu: float, learn_nu: bool) -> dict[str, np.ndarray]:
    """Marginal means, 5 %/95 % quantiles and densities of (β0, β1) on a 801² grid.

    Unnormalised pseudo-posterior exp(−2 Σ hinge − |β1/ν|^α); with ν learned, the prior of β1
    is integrated numerically over τ = ν^{-α} ~ Gamma(A_NU, B_NU) on a log-τ grid.
    """
    Xt = two_coefficient_problem()
    grid = np.linspace(-4.0, 4.0, 801)
    step = grid[1] - grid[0]
    b0, b1 = np.meshgrid(grid, grid, indexing="ij")
    hinge = sum(np.maximum(0.0, 1.0 - r[0] * b0 - r[1] * b1) for r in Xt)
    if learn_nu:
        log_tau = np.linspace(np.log(1e-8), np.log(1e5), 3000)
        tau = np.exp(log_tau)
        # p(β1 | τ) p(τ) τ (Jacobian of log τ), up to constants: τ^{1/α + a} e^{−τ(|β1|^α + b)}
        log_f = (1 / alpha + A_NU) * log_tau - tau * (np.abs(grid)[:, None] ** alpha + B_NU)
        top = log_f.max(axis=1, keepdims=True)
        log_prior = np.log(np.trapezoid(np.exp(log_f - top), log_tau, axis=1)) + top[:, 0]
        log_post = -2.0 * hinge + log_prior[None, :]
        # E[τ | y] = E[E(τ | β1)], E(τ | β1) = ∫ τ f / ∫ f
        e_tau = np.trapezoid(np.exp(log_f - top) * tau, log_tau, axis=1) / np.trapezoid(
            np.exp(log_f - top), log_tau, axis=1
        )
    else:
        log_post = -2.0 * hinge - np.abs(b1 / nu) ** alpha
    post = np.exp(log_post - log_post.max())
    post /= post.sum()
    out: dict[str, np.ndarray] = {}
    marginals = [post.sum(axis=1), post.sum(axis=0)]
    for j, marg in enumerate(marginals):
        assert marg[0] + marg[-1] < 1e-7  # the grid holds the posterior
        cdf = np.cumsum(marg) - 0.5 * marg
        out[f"mean{j}"] = np.sum(grid * marg)
        out[f"q{j}"] = np.interp([0.05, 0.95], cdf, grid)
        out[f"density{j}"] = np.interp(out[f"q{j}"], grid, marg / step)
    if learn_nu:
        out["tau"] = np.sum(marginals[1] * e_tau)
    return out


def run_chains(alpha: float, learn_nu: bool, **kwargs: float) -> list[dict[str, np.ndarray]]:
    Xt = two_coefficient_problem()
    seeds = np.random.SeedSequence(2024).spawn(CHAINS)
    out = run_gibbs_chains(  # the chains advance together, as BayesianSVM runs them
        Xt, alpha=alpha, nu=1.0, learn_nu=learn_nu, a_nu=A_NU, b_nu=B_NU, n_draws=DRAWS,
        burn_in=BURN, thin=1, penalised=np.array([False, True]), seeds=seeds, **kwargs,
    )  # fmt: skip
    return [{key: value[c] for key, value in out.items()} for c in range(CHAINS)]


def quantile_mcse(chains: np.ndarray, q: float, p: float, density: float) -> float:
    """MCSE of the p-quantile: sqrt(p(1−p)/ESS(1[θ ≤ q])) / f(q) (delta method)."""
    ind = (chains <= q).astype(float)
    return float(np.sqrt(p * (1 - p) / dg.ess_basic(dg.split_chains(ind))) / density)


@pytest.mark.parametrize(
    ("alpha", "learn_nu"),
    [
        (2.0, False),
        (1.0, False),
        (2.0, True),
        (1.0, True),
        pytest.param(1.5, False, marks=pytest.mark.slow),
    ],
)
def test_gibbs_matches_quadrature(alpha: float, learn_nu: bool) -> None:
    ref = quadrature(alpha, 1.0, learn_nu)
    runs = run_chains(alpha, learn_nu)
    draws = np.stack([r["beta_draws"] for r in runs])  # (chains, draws, 2)
    for j in range(2):
        chains = draws[:, :, j]
        assert dg.rhat_rank(chains) < 1.01
        ess = dg.ess_bulk(chains)
        mcse = chains.std() / np.sqrt(ess)
        rb = np.mean([r["beta_rb"][j] for r in runs])
        assert abs(rb - ref[f"mean{j}"]) < 4 * mcse, (j, rb, ref[f"mean{j}"], mcse)
        assert abs(chains.mean() - ref[f"mean{j}"]) < 4 * mcse
        for p, q_ref, dens in zip((0.05, 0.95), ref[f"q{j}"], ref[f"density{j}"], strict=True):
            q = np.quantile(chains, p)
            tol = 4 * quantile_mcse(chains, q_ref, p, dens)
            assert abs(q - q_ref) < tol, (j, p, q, q_ref, tol)
    nu = np.stack([r["nu_draws"] for r in runs])
    if learn_nu:
        tau = nu**-alpha
        mcse = tau.std() / np.sqrt(dg.ess_bulk(tau))
        assert abs(tau.mean() - ref["tau"]) < 4 * mcse, (tau.mean(), ref["tau"], mcse)
    else:
        assert np.all(nu == 1.0)


def reference_draw(
    Xt: np.ndarray, lam_inv: np.ndarray, prec: np.ndarray, z: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(β, b) of bayes-svm.md §3.1 written out with numpy: b = Q⁻¹ρ, β = b + L'⁻¹z, Q = LL'."""
    Q = Xt.T @ (Xt * lam_inv[:, None]) + np.diag(prec)
    rho = Xt.T @ (1.0 + lam_inv)
    L = np.linalg.cholesky(Q)
    b = linalg.cho_solve((L, True), rho)
    return b + linalg.solve_triangular(L, z, trans="T", lower=True), b


def test_fast_gaussian_draw_equals_cholesky_draw() -> None:
    rng = np.random.default_rng(0)
    n, k = 12, 30
    Xt = rng.normal(size=(n, k))
    lam_inv = rng.gamma(2.0, size=n)
    prec = rng.gamma(2.0, size=k)
    _, b_chol = reference_draw(Xt, lam_inv, prec, rng.standard_normal(k))
    _, b_fast = draw_fast(Xt, lam_inv, prec, rng)
    np.testing.assert_allclose(b_fast, b_chol, rtol=1e-9, atol=1e-12)
    # moments of the fast draws against the exact N(b, B)
    B = np.linalg.inv(Xt.T @ (Xt * lam_inv[:, None]) + np.diag(prec))
    draws = np.array([draw_fast(Xt, lam_inv, prec, rng)[0] for _ in range(4000)])
    se = np.sqrt(np.diag(B) / 4000)
    assert np.all(np.abs(draws.mean(axis=0) - b_chol) < 4.5 * se)
    np.testing.assert_allclose(np.cov(draws.T), B, atol=0.1 * np.max(np.diag(B)))


def test_workspace_draw_equals_cholesky_draw() -> None:
    rng = np.random.default_rng(1)
    n, k = 40, 6
    Xt = rng.normal(size=(n, k))
    workspace = CholeskyWorkspace(Xt)
    for lam_inv in (rng.gamma(2.0, size=n), np.exp(rng.uniform(-20.0, 20.0, size=n))):
        prec = np.r_[0.0, rng.gamma(2.0, size=k - 1)]  # a flat first coefficient
        z = np.random.default_rng(2).standard_normal(k)
        beta_ref, b_ref = reference_draw(Xt, lam_inv, prec, z)
        beta, b = workspace.draw(np.sqrt(lam_inv), prec, z)
        scale = np.abs(b_ref).max()
        np.testing.assert_allclose(b, b_ref, rtol=0, atol=1e-9 * scale)
        np.testing.assert_allclose(beta, beta_ref, rtol=0, atol=1e-9 * np.abs(beta_ref).max())
        jittered = workspace._draw_jittered(prec, z)  # the fallback computes the same draw
        np.testing.assert_allclose(jittered[0], beta, rtol=0, atol=1e-9 * np.abs(beta).max())


def test_penalised_selector_slices_contiguous_blocks() -> None:
    assert penalised_selector(np.array([False, True, True])) == slice(1, 3)
    assert penalised_selector(np.array([False, False])) == slice(0, 0)
    np.testing.assert_array_equal(penalised_selector(np.array([True, False, True])), [0, 2])


def test_gibbs_with_intercept_last_matches_quadrature() -> None:
    # penalised = [True, False] takes the index-array path instead of the slice path
    ref = quadrature(1.0, 1.0, False)
    Xt = two_coefficient_problem()[:, ::-1]
    runs = [
        run_gibbs(
            Xt, alpha=1.0, nu=1.0, learn_nu=False, a_nu=A_NU, b_nu=B_NU, n_draws=DRAWS,
            burn_in=BURN, thin=1, penalised=np.array([True, False]), seed=s,
        )
        for s in np.random.SeedSequence(7).spawn(CHAINS)
    ]  # fmt: skip
    draws = np.stack([r["beta_draws"] for r in runs])
    for j, ref_j in ((0, 1), (1, 0)):
        chains = draws[:, :, j]
        mcse = chains.std() / np.sqrt(dg.ess_bulk(chains))
        rb = np.mean([r["beta_rb"][j] for r in runs])
        assert abs(rb - ref[f"mean{ref_j}"]) < 4 * mcse, (j, rb, ref[f"mean{ref_j}"], mcse)


def test_fast_path_chain_agrees_with_cholesky_chain() -> None:
    Xt = two_coefficient_problem()
    kwargs = dict(
        alpha=2.0, nu=1.0, learn_nu=False, a_nu=1.0, b_nu=1.0, n_draws=3000, burn_in=200,
        thin=1, penalised=np.array([False, True]),
    )  # fmt: skip
    fast = run_gibbs(Xt, seed=1, gaussian="fast", **kwargs)
    chol = run_gibbs(Xt, seed=2, gaussian="cholesky", **kwargs)
    sd = fast["beta_draws"].std(axis=0)
    ess = [dg.ess_bulk(fast["beta_draws"][None, :, j]) for j in range(2)]
    np.testing.assert_array_less(np.abs(fast["beta_rb"] - chol["beta_rb"]), 5 * sd / np.sqrt(ess))


def test_reproducible_thinning_and_progress() -> None:
    Xt = two_coefficient_problem()
    seen: list[float] = []
    kwargs = dict(
        alpha=1.0, nu=1.0, learn_nu=True, a_nu=1.0, b_nu=1.0, n_draws=50, burn_in=20, thin=3,
        penalised=np.array([False, True]),
    )  # fmt: skip
    a = run_gibbs(Xt, seed=np.random.SeedSequence(9), progress=seen.append, **kwargs)
    b = run_gibbs(Xt, seed=np.random.SeedSequence(9), **kwargs)
    np.testing.assert_array_equal(a["beta_draws"], b["beta_draws"])
    assert a["beta_draws"].shape == (50, 2) and a["nu_draws"].shape == (50,)
    assert np.all(np.isfinite(a["beta_draws"])) and np.all(a["nu_draws"] > 0)
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) >= 50
    c = run_gibbs(Xt, seed=np.random.SeedSequence(10), **kwargs)
    assert not np.array_equal(a["beta_draws"], c["beta_draws"])


def test_progress_exception_cancels() -> None:
    class Cancelled(Exception):
        pass

    def cancel(fraction: float) -> None:
        if fraction > 0.3:
            raise Cancelled

    with pytest.raises(Cancelled):
        run_gibbs(
            two_coefficient_problem(), alpha=2.0, nu=1.0, learn_nu=False, a_nu=1.0, b_nu=1.0,
            n_draws=1000, burn_in=0, thin=1, penalised=np.array([False, True]), seed=0,
            progress=cancel,
        )  # fmt: skip


@pytest.mark.parametrize(
    "bad",
    [
        {"alpha": 0.0},
        {"alpha": 2.5},
        {"nu": -1.0},
        {"thin": 0},
        {"gaussian": "qr"},
        {"overrelax": 1.0},
    ],
)
def test_invalid_arguments_raise(bad: dict) -> None:
    kwargs = dict(
        alpha=2.0, nu=1.0, learn_nu=False, a_nu=1.0, b_nu=1.0, n_draws=10, burn_in=0, thin=1,
        penalised=np.array([False, True]), seed=0,
    )  # fmt: skip
    kwargs.update(bad)
    with pytest.raises(ValueError):
        run_gibbs(two_coefficient_problem(), **kwargs)


def test_more_coefficients_than_rows_uses_fast_draw_consistently() -> None:
    rng = np.random.default_rng(4)
    n, k = 12, 40
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    Xt = y[:, None] * (rng.normal(size=(n, k)) + 0.3 * y[:, None])
    kwargs = dict(
        alpha=2.0, nu=0.5, learn_nu=False, a_nu=1.0, b_nu=1.0, n_draws=2000, burn_in=200,
        thin=1, penalised=np.ones(k, dtype=bool),
    )  # fmt: skip
    auto = run_gibbs(Xt, seed=5, **kwargs)  # k > n: the O(n²k) draw
    chol = run_gibbs(Xt, seed=6, gaussian="cholesky", **kwargs)
    assert np.all(np.isfinite(auto["beta_draws"]))
    sd = chol["beta_draws"].std(axis=0)
    ess = np.array([dg.ess_bulk(chol["beta_draws"][None, :, j]) for j in range(k)])
    # 40 coefficients compared at 5 MCSE of the difference of two independent runs
    assert np.all(np.abs(auto["beta_rb"] - chol["beta_rb"]) < 5 * np.sqrt(2) * sd / np.sqrt(ess))


def test_chains_in_threads_restore_blas_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_info, threadpool_limits

    Xt = two_coefficient_problem()

    def chain(seed: int) -> np.ndarray:
        return run_gibbs(
            Xt, alpha=2.0, nu=1.0, learn_nu=False, a_nu=1.0, b_nu=1.0, n_draws=200, burn_in=0,
            thin=1, penalised=np.array([False, True]), seed=seed,
        )["beta_rb"]  # fmt: skip

    # two BLAS threads before, so that a lost restore (left at one) is seen under the test
    # command's OPENBLAS_NUM_THREADS=1
    with threadpool_limits(limits=2, user_api="blas"):
        before = [info["num_threads"] for info in threadpool_info()]
        with ThreadPoolExecutor(4) as pool:
            threaded = list(pool.map(chain, range(6)))
        np.testing.assert_array_equal(threaded, [chain(s) for s in range(6)])  # seeds, not threads
        assert [info["num_threads"] for info in threadpool_info()] == before


@pytest.mark.parametrize("overrelax", [0.0, 0.5])
def test_other_overrelaxation_matches_quadrature(overrelax: float) -> None:
    """Any ρ in (−1, 1) leaves the posterior unchanged: ρ = 0 (plain Gibbs) and ρ = 0.5."""
    ref = quadrature(1.0, 1.0, False)
    runs = run_chains(1.0, False, overrelax=overrelax)
    draws = np.stack([r["beta_draws"] for r in runs])
    for j in range(2):
        chains = draws[:, :, j]
        mcse = chains.std() / np.sqrt(dg.ess_bulk(chains))
        rb = np.mean([r["beta_rb"][j] for r in runs])
        assert abs(rb - ref[f"mean{j}"]) < 4 * mcse, (j, rb, ref[f"mean{j}"], mcse)
        assert abs(chains.mean() - ref[f"mean{j}"]) < 4 * mcse


@pytest.mark.parametrize(
    ("alpha", "learn_nu", "gaussian"),
    [(1.0, True, "auto"), (2.0, False, "auto"), (2.0, True, "fast"), (1.5, True, "auto")],
)
def test_batched_chains_match_chains_run_alone(alpha: float, learn_nu: bool, gaussian: str) -> None:
    """Chain c of a batch draws from its own seed as a lone chain does: the same draws, bit for
    bit (per-chain products: round-off would be amplified over many sweeps), whatever its
    batch-mates."""
    rng = np.random.default_rng(7)
    n, k = 40, 5
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    Xt = y[:, None] * np.column_stack([np.ones(n), rng.normal(size=(n, k - 1)) + 0.5 * y[:, None]])
    # an unpenalised coefficient inside the penalised ones: an index selector, not a slice
    kwargs = dict(
        alpha=alpha, nu=0.8, learn_nu=learn_nu, a_nu=1.0, b_nu=1.0, n_draws=6, burn_in=2,
        thin=2, penalised=np.array([False, True, False, True, True]), gaussian=gaussian,
    )  # fmt: skip
    seeds = np.random.SeedSequence(11).spawn(3)
    batch = run_gibbs_chains(Xt, seeds=seeds, **kwargs)
    assert batch["beta_draws"].shape == (3, 6, k) and batch["nu_draws"].shape == (3, 6)
    for c, seed in enumerate(seeds):
        alone = run_gibbs(Xt, seed=seed, **kwargs)
        for key, value in alone.items():
            np.testing.assert_array_equal(batch[key][c], value)
    assert not np.allclose(batch["beta_draws"][0], batch["beta_draws"][1])
    swapped = run_gibbs_chains(Xt, seeds=[seeds[2], seeds[0]], **kwargs)
    np.testing.assert_array_equal(swapped["beta_draws"][1], batch["beta_draws"][0])


def misaligned_copy(A: np.ndarray) -> np.ndarray:
    """A copy of A whose data starts one byte past an 8-byte boundary, as an array unpickled from a
    dask frame can (numpy then computes ``@`` in its own loop, not BLAS)."""
    raw = np.empty(A.nbytes + 16, dtype=np.uint8)
    start = (-raw.ctypes.data) % 8 + 1
    out = raw[start : start + A.nbytes].view(A.dtype).reshape(A.shape)
    out[...] = A
    assert not out.flags.aligned
    return out


@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_draws_do_not_depend_on_the_alignment_of_the_data(alpha: float) -> None:
    """The same seeds give the same draws, bit for bit, from an X̃ at any address (the chains of a
    fit run as dask tasks receive X̃ at an arbitrary byte offset)."""
    rng = np.random.default_rng(5)
    n, k = 190, 7
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    Xt = y[:, None] * np.column_stack([np.ones(n), rng.normal(size=(n, k - 1)) + 0.5 * y[:, None]])
    kwargs = dict(
        alpha=alpha, nu=1.0, learn_nu=True, a_nu=1.0, b_nu=1.0, n_draws=40, burn_in=10, thin=1,
        penalised=np.arange(k) > 0, seeds=[1, 2],
    )  # fmt: skip
    aligned = run_gibbs_chains(Xt, **kwargs)
    shifted = run_gibbs_chains(misaligned_copy(Xt), **kwargs)
    for key, value in aligned.items():
        np.testing.assert_array_equal(shifted[key], value)


def test_batched_chains_need_a_seed() -> None:
    with pytest.raises(ValueError):
        run_gibbs_chains(
            two_coefficient_problem(), alpha=2.0, nu=1.0, learn_nu=False, a_nu=1.0, b_nu=1.0,
            n_draws=10, burn_in=0, thin=1, penalised=np.array([False, True]), seeds=[],
        )  # fmt: skip
