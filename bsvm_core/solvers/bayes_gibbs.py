"""Gibbs sampler of the data-augmented linear SVM, Polson & Scott (2011), bayes-svm.md §3 and §6.

Pseudo-posterior π(β) ∝ exp{−2 Σ max(1 − x̃ᵢ'β, 0) − ν^{-α} Σⱼ |βⱼ|^α} on standardised predictors
(σⱼ = 1), flat prior on unpenalised coefficients.  One sweep:

* α = 1: β | λ, ω, ν (over-relaxed) → Metropolis moves of the scale of β and of each flat
  coefficient, then independence Metropolis-Hastings moves from a Gaussian fitted in burn-in, all
  with λ and ω integrated out (:mod:`.collapsed_moves`, which gives the argument that they keep
  the posterior) → λ | β → (τ = ν^{-α} | β, ω integrated out) → ω | β, ν (the new ν);
  λ ⊥ (τ, ω) given β, so λ and ω are one batch of n + k inverse-Gaussian draws after τ;
* α = 2: the same without ω (prior precision 2/ν²);
* other α ∈ (0, 2): the uniform (Bayesian-bridge) mixture of §3.4 — β coordinate-wise from
  truncated normals given λ and the slice variables u, then λ, τ, u in that order.

Why the posterior is unchanged by the over-relaxed β step (α ∈ {1, 2}).  Write θ = (β, λ, ω, ν)
and π(θ) for the augmented posterior, whose β-marginal is the pseudo-posterior above (§2).  Given
(λ, ω, ν), β ~ N(b, B) (§3.1).  The move (Adler 1981, Phys. Rev. D 23:2901; Barone & Frigessi
1990, Stat. Comput.; Neal 1998, "Suppressing random walks in Markov chain Monte Carlo using ordered
overrelaxation", in Learning in Graphical Models, pp. 205-228)

    β' = b + ρ(β − b) + √(1 − ρ²)·ε,   ε ~ N(0, B),   fixed ρ ∈ (−1, 1),

maps N(b, B) to itself (mean b; covariance ρ²B + (1 − ρ²)B = B), and (β, β') is then jointly
Gaussian with symmetric cross-covariance ρB, so the kernel is reversible with respect to N(b, B).
It leaves the full conditional π(β | λ, ω, ν) invariant and (λ, ω, ν) unchanged, hence leaves π
invariant, exactly as the plain Gibbs draw (ρ = 0) does; the other steps are unchanged Gibbs (or
partially collapsed, §3.5) draws, so the composition keeps π.  Its noise has full support, so the
chain stays irreducible.  ε is the deviation b' − b of the usual exact draw (Cholesky, or
Bhattacharya et al. 2016), so the step costs nothing extra.  The β it starts from must be the one
λ and ω were drawn from: it is the previous sweep's β.  ρ < 0 moves β to the far side of b and so
cuts the autocorrelation that the strong β-λ coupling of data augmentation causes (ρ = −0.9
raises the smallest bulk ESS per sweep on breast cancer 1.9x at α = 2 and 1.85x at α = 1, 4 chains
× 4,000 draws, two seeds; in a two-block Gaussian Gibbs sampler with correlation c the lag-1 autocorrelation of β falls from c² to
ρ + (1 − ρ)c²).  The Rao-Blackwellised mean averages b = E[β | λ, ω, ν], a function of the
stationary (λ, ω, ν), so it stays unbiased.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..random_variates import truncated_normal, wald_inverse_mean, wald_root_from_variates
from .collapsed_moves import CollapsedMoves
from .gaussian_draw import CholeskyWorkspace, blas_threads_for, draw_fast, normal_equations

Progress = Callable[[float], object] | None

#: Default ρ of the over-relaxed β step: on breast cancer (n = 569, k = 31) ρ = −0.9 raises the
#: smallest bulk ESS per sweep about 1.9x at α = 1 and α = 2 against ρ = 0, at no extra cost.
OVERRELAX = -0.9


def draw_lambda_inv(
    Xt: NDArray[np.float64], beta: NDArray[np.float64], rng: np.random.Generator
) -> NDArray[np.float64]:
    """λᵢ⁻¹ | β ~ IG(mean 1/|1 − x̃ᵢ'β|, shape 1); Polson & Scott (2011) eq. 6, §3.2."""
    return wald_inverse_mean(np.abs(1.0 - Xt @ beta), 1.0, rng)


def draw_tau(
    beta_pen: NDArray[np.float64], alpha: float, a_nu: float, b_nu: float, rng: np.random.Generator
) -> float:
    """τ = ν^{-α} | β ~ Gamma(a_ν + k/α, rate b_ν + Σ|βⱼ|^α), ω integrated out; §3.5."""
    s = float(np.sum(np.abs(beta_pen) ** alpha))
    return float(rng.gamma(a_nu + beta_pen.size / alpha, 1.0 / (b_nu + s)))


class ProgressReporter:
    """Calls ``progress(fraction)`` about every 1 % of the sweeps and once at the end."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress = progress
        self.total = total
        self.every = max(1, total // 100)

    def __call__(self, done: int) -> None:
        """Report ``done`` sweeps out of the total, when due."""
        if self.progress is not None and (done % self.every == 0 or done == self.total):
            self.progress(done / self.total)


def check_mcmc_args(
    Xt: NDArray[np.float64],
    penalised: NDArray[np.bool_],
    alpha: float,
    nu: float,
    n_draws: int,
    burn_in: int,
    thin: int,
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """(C-contiguous, aligned float64 X̃, boolean mask); ValueError for arguments outside their domains."""
    if not 0.0 < alpha <= 2.0:
        raise ValueError(f"alpha must be in (0, 2]; got {alpha}")
    if not (np.isfinite(nu) and nu > 0.0):
        raise ValueError(f"nu must be positive and finite; got {nu}")
    if n_draws < 1 or burn_in < 0 or thin < 1:
        raise ValueError(
            f"need n_draws >= 1, burn_in >= 0, thin >= 1; got {n_draws}, {burn_in}, {thin}"
        )
    # aligned too: an array unpickled from a dask frame can start at any byte, and numpy's matmul
    # then skips BLAS for its own loop, whose sums differ at round-off from the same draw elsewhere
    Xt = np.require(Xt, dtype=np.float64, requirements=["C_CONTIGUOUS", "ALIGNED"])
    pen = np.asarray(penalised, dtype=bool)
    if pen.shape != (Xt.shape[1],):
        raise ValueError(f"penalised must have shape ({Xt.shape[1]},); got {pen.shape}")
    return Xt, pen


def _sweep_coordinates(
    beta: NDArray[np.float64],
    Q: NDArray[np.float64],
    rho: NDArray[np.float64],
    bound: NDArray[np.float64],
    rng: np.random.Generator,
) -> None:
    """βⱼ | β₋ⱼ, λ, u ~ N(·, 1/Qⱼⱼ) truncated to |βⱼ| < boundⱼ, in place; bayes-svm.md §3.4 step 2."""
    for j in range(beta.size):
        qjj = Q[j, j]
        if qjj <= 1e-300:
            beta[j] = rng.uniform(-bound[j], bound[j])
            continue
        mean = (rho[j] - Q[j] @ beta + qjj * beta[j]) / qjj
        beta[j] = truncated_normal(mean, 1.0 / np.sqrt(qjj), -bound[j], bound[j], rng)


def penalised_selector(pen: NDArray[np.bool_]) -> slice | NDArray[np.intp]:
    """The penalised coefficients as a slice when contiguous (views, no copies), else indices."""
    idx = np.flatnonzero(pen)
    if idx.size == 0:
        return slice(0, 0)
    if idx[-1] - idx[0] + 1 == idx.size:
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


def _gaussian_chains(
    Xt: NDArray[np.float64],
    alpha: float,
    nu: float,
    learn_nu: bool,
    a_nu: float,
    b_nu: float,
    pen: NDArray[np.bool_],
    use_fast: bool,
    overrelax: float,
    moves: bool,
    adapt_sweeps: int,
    rngs: Sequence[np.random.Generator],
) -> Iterator[tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]]:
    """Sweeps (β, b, ν) of C chains at once, shapes (C, k), (C, k), (C,), for α ∈ {1, 2}:
    β | λ, ω, ν (§3.1, over-relaxed; module docstring), then (if ``moves``) the scale,
    flat-coefficient and independence moves with λ, ω integrated out (:mod:`.collapsed_moves`,
    learnt over the first ``adapt_sweeps`` sweeps), then τ | β (§3.5), then λ, ω | β, ν.

    λ and ω are conditionally independent given β (and ν), so each sweep draws them as one batch
    of inverse-Gaussian roots λᵢ^{-1/2}, ωⱼ^{-1/2} (all the β draw needs), from one batch of
    normals (shared with the β draw) and one of uniforms.  Prior precision pⱼ = ωⱼ⁻¹/ν², or
    2/ν² for α = 2, and 0 for flat coefficients.  Chain c draws every variate from ``rngs[c]`` in
    the same order as a chain run alone, so the chains are independent and each one's draws do not
    depend on the others; the per-chain β factorisations and margins X̃β loop in Python (one
    shared workspace; one gemv per chain, because a (C, k) × (k, n) gemm sums in another order and
    the round-off would grow over the sweeps), the elementwise steps are batched over chains.
    """
    n, k = Xt.shape
    C = len(rngs)
    sel = penalised_selector(pen)
    with_omega = alpha == 1.0
    n_ig = n + (int(pen.sum()) if with_omega else 0)
    workspace = None if use_fast else CholeskyWorkspace(Xt)
    mover = CollapsedMoves(Xt, pen, sel, alpha, C, adapt_sweeps) if moves else None
    n_z = n_ig + (0 if use_fast else k)
    # per chain: λ/ω normals, β normals, move normals; λ/ω uniforms, move uniforms
    z = np.empty((C, n_z + (0 if mover is None else mover.n_normals)))
    u = np.empty((C, n_ig + (0 if mover is None else mover.n_uniforms)))
    inv_mean = np.empty((C, n_ig))
    lam_root = np.ones((C, n))
    precision = np.zeros((C, k))
    precision[:, sel] = (0.5 if with_omega else 2.0) / nu**2  # α = 1: start at ω⁻¹ = E[ω]⁻¹ = ½
    nus = np.full(C, float(nu))
    n_pen = int(pen.sum())
    keep = np.sqrt(1.0 - overrelax * overrelax)
    XtT = Xt.T
    margin = np.empty((C, n))
    beta_prev = None
    sweep = 0
    while True:
        beta, b = np.empty((C, k)), np.empty((C, k))
        for c, rng in enumerate(rngs):
            rng.standard_normal(out=z[c])
            rng.random(out=u[c])
            if workspace is None:
                beta[c], b[c] = draw_fast(Xt, lam_root[c] * lam_root[c], precision[c], rng)
            else:
                beta[c], b[c] = workspace.draw(lam_root[c], precision[c], z[c, n_ig:n_z])
        if beta_prev is not None and overrelax != 0.0:
            beta -= b  # β' = b + ρ(β − b) + √(1 − ρ²)·(N(b, B) draw − b)
            beta *= keep
            beta += overrelax * (beta_prev - b)
            beta += b
        for c in range(C):  # one gemv per chain: a (C, k) gemm would sum in another order
            np.matmul(beta[c], XtT, out=margin[c])
        if mover is not None:
            adapt = sweep if sweep < adapt_sweeps else -1
            mover.step(beta, margin, nus, z[:, n_z:], u[:, n_ig:], adapt)
        sweep += 1
        beta_prev = beta
        pen_beta = beta[:, sel]
        if learn_nu:
            s = np.sum(np.abs(pen_beta) ** alpha, axis=1)
            shape = a_nu + n_pen / alpha
            for c, rng in enumerate(rngs):  # τ | β ~ Gamma(a_ν + k/α, rate b_ν + Σ|βⱼ|^α), §3.5
                nus[c] = float(rng.gamma(shape, 1.0 / (b_nu + s[c]))) ** (-1.0 / alpha)
        residual = np.subtract(1.0, margin, out=inv_mean[:, :n])  # 1/mean of λ⁻¹ | β: |1 − x̃ᵢ'β|
        np.abs(residual, out=residual)
        if with_omega:
            omega_inv_mean = inv_mean[:, n:]
            np.abs(pen_beta, out=omega_inv_mean)  # 1/mean of ω⁻¹ | β, ν: |βⱼ|/ν (§3.3)
            omega_inv_mean /= nus[:, np.newaxis]
        root = wald_root_from_variates(inv_mean, 1.0, z[:, :n_ig], u[:, :n_ig])
        lam_root = root[:, :n]
        if with_omega:
            omega_root = root[:, n:]
            omega_root /= nus[:, np.newaxis]
            precision[:, sel] = np.multiply(omega_root, omega_root, out=omega_root)
        elif learn_nu:
            precision[:, sel] = (2.0 / nus**2)[:, np.newaxis]
        yield beta, b, nus.copy()


def _bridge_chain(
    Xt: NDArray[np.float64],
    alpha: float,
    nu: float,
    learn_nu: bool,
    a_nu: float,
    b_nu: float,
    pen: NDArray[np.bool_],
    rng: np.random.Generator,
) -> Iterator[tuple[NDArray[np.float64], NDArray[np.float64], float]]:
    """Sweeps (β, β, ν) for α ∉ {1, 2}: β | λ, u coordinate-wise, λ | β, τ | β, u | β, ν (§3.4)."""
    n, k = Xt.shape
    m = int(pen.sum())
    beta = np.linalg.solve(Xt.T @ Xt + np.eye(k), Xt.T @ np.ones(n))  # ridge start, not 0
    u = np.abs(beta[pen] / nu) ** alpha + rng.standard_exponential(m)
    bound = np.full(k, np.inf)
    lam_inv = np.ones(n)
    while True:
        bound[pen] = nu * u ** (1.0 / alpha)
        Q, rho = normal_equations(Xt, lam_inv)
        _sweep_coordinates(beta, Q, rho, bound, rng)
        lam_inv = draw_lambda_inv(Xt, beta, rng)
        if learn_nu:
            nu = draw_tau(beta[pen], alpha, a_nu, b_nu, rng) ** (-1.0 / alpha)
        u = np.abs(beta[pen] / nu) ** alpha + rng.standard_exponential(m)
        yield beta, beta, nu


def _bridge_chains(
    Xt: NDArray[np.float64],
    alpha: float,
    nu: float,
    learn_nu: bool,
    a_nu: float,
    b_nu: float,
    pen: NDArray[np.bool_],
    rngs: Sequence[np.random.Generator],
) -> Iterator[tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]]:
    """:func:`_bridge_chain` for each of C chains in turn, stacked per sweep (shapes as
    :func:`_gaussian_chains`); the coordinate-wise β step leaves nothing to batch."""
    chains = [_bridge_chain(Xt, alpha, nu, learn_nu, a_nu, b_nu, pen, rng) for rng in rngs]
    for sweep in zip(*chains, strict=True):
        beta = np.array([s[0] for s in sweep])
        yield beta, beta, np.array([s[2] for s in sweep])


def run_gibbs_chains(
    Xt: NDArray[np.float64],
    *,
    alpha: float,
    nu: float,
    learn_nu: bool,
    a_nu: float,
    b_nu: float,
    n_draws: int,
    burn_in: int,
    thin: int,
    penalised: NDArray[np.bool_],
    seeds: Sequence[int | np.random.SeedSequence | None],
    progress: Progress = None,
    gaussian: str = "auto",
    overrelax: float = OVERRELAX,
    collapsed_moves: bool = True,
) -> dict[str, Any]:
    """Independent Gibbs chains of the Polson-Scott SVM pseudo-posterior, run together;
    bayes-svm.md §6 (§3.4 for α ∉ {1,2}).

    Chain c is seeded by ``np.random.default_rng(seeds[c])`` and draws its variates in the same
    order as :func:`run_gibbs` with that seed and the same per-chain products, so its draws equal
    that single run's bit for bit (on one machine, BLAS single-threaded as it is for problems
    below :data:`~.gaussian_draw.SMALL_PROBLEM_FLOPS`).  For α ∈ {1, 2} one sweep advances every
    chain with batched numpy calls: at the problem sizes the sampler is used for, a one-chain
    sweep is dominated by per-call overhead (breast cancer, n = 569, k = 31: about 120 µs, of which
    the k×k syrk is 28 µs).

    Parameters
    ----------
    Xt : ndarray of shape (n, k)
        Rows yᵢxᵢ' (standardised predictors, intercept column first if any).
    alpha, nu : float
        Penalty exponent in (0, 2] and (initial) scale ν > 0.
    learn_nu : bool
        Sample τ = ν^{-α} ~ Gamma(a_nu, b_nu) a priori (collapsed draw, before ω/u).
    a_nu, b_nu : float
        Shape and rate of the Gamma prior on ν^{-α}.
    n_draws, burn_in, thin : int
        Kept draws, discarded sweeps, and sweeps per kept draw.
    penalised : ndarray of bool, shape (k,)
        False for flat-prior coefficients (the intercept).
    seeds : sequence of int, SeedSequence or None
        One seed of ``np.random.default_rng`` per chain (at least one).
    progress : callable, optional
        Called with the fraction of sweeps done; exceptions propagate (cancellation).
    gaussian : {"auto", "cholesky", "fast"}
        β-draw algorithm for α ∈ {1, 2}; "auto" uses the O(n²k) draw when k > n.
    overrelax : float in (-1, 1), default :data:`OVERRELAX`
        ρ of the over-relaxed β | λ, ω, ν step (α ∈ {1, 2}); 0 is the plain Gibbs draw.  Every ρ
        leaves the posterior unchanged (module docstring); negative ρ mixes faster.
    collapsed_moves : bool, default True
        For α ∈ {1, 2}, add each sweep a Metropolis move of the scale of β, one of each flat
        coefficient and a few independence Metropolis-Hastings moves, with λ and ω integrated out
        (:mod:`.collapsed_moves`: the argument that the posterior is unchanged); their step sizes
        and the independence proposal are learnt during burn-in only.  False keeps the
        plain data-augmentation sweep.

    Returns
    -------
    dict
        ``beta_draws`` (C, n_draws, k), ``beta_rb`` (C, k) Rao-Blackwellised means (average of the
        conditional means b over all post-burn-in sweeps; for α ∉ {1, 2} the draw average),
        ``nu_draws`` (C, n_draws).
    """
    Xt, pen = check_mcmc_args(Xt, penalised, alpha, nu, n_draws, burn_in, thin)
    if not -1.0 < overrelax < 1.0:
        raise ValueError(f"overrelax must be in (-1, 1); got {overrelax}")
    if gaussian not in ("auto", "cholesky", "fast"):
        raise ValueError(f"gaussian must be 'auto', 'cholesky' or 'fast'; got {gaussian!r}")
    if len(seeds) < 1:
        raise ValueError("need at least one seed (one per chain)")
    n, k = Xt.shape
    rngs = [np.random.default_rng(seed) for seed in seeds]
    use_fast = gaussian == "fast" or (gaussian == "auto" and k > n)
    total = burn_in + n_draws * thin
    report = ProgressReporter(progress, total)

    C = len(rngs)
    beta_draws = np.empty((C, n_draws, k))
    nu_draws = np.empty((C, n_draws))
    rb_sum = np.zeros((C, k))

    with blas_threads_for(*Xt.shape):
        if alpha in (1.0, 2.0):
            chain = _gaussian_chains(
                Xt, alpha, nu, learn_nu, a_nu, b_nu, pen, use_fast, overrelax,
                collapsed_moves, burn_in, rngs,
            )  # fmt: skip
        else:
            chain = _bridge_chains(Xt, alpha, nu, learn_nu, a_nu, b_nu, pen, rngs)
        for sweep, (beta, b, nus) in zip(range(1, total + 1), chain, strict=False):
            kept = sweep - burn_in
            if kept > 0:
                rb_sum += b
                if kept % thin == 0:
                    beta_draws[:, kept // thin - 1] = beta
                    nu_draws[:, kept // thin - 1] = nus
            report(sweep)

    return {
        "beta_draws": beta_draws,
        "beta_rb": rb_sum / (n_draws * thin),
        "nu_draws": nu_draws,
    }


def run_gibbs(
    Xt: NDArray[np.float64],
    *,
    seed: int | np.random.SeedSequence | None,
    **kwargs: Any,
) -> dict[str, Any]:
    """One Gibbs chain: :func:`run_gibbs_chains` with ``seeds=[seed]``, outputs without the chain
    axis: ``beta_draws`` (n_draws, k), ``beta_rb`` (k,), ``nu_draws`` (n_draws,)."""
    out = run_gibbs_chains(Xt, seeds=[seed], **kwargs)
    return {key: value[0] for key, value in out.items()}
