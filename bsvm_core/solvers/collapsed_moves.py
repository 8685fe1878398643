"""Metropolis moves of β (slow lines, Gaussian independence proposals), λ and ω integrated out.

The Gibbs sampler of the Polson-Scott SVM (:mod:`.bayes_gibbs`) alternates β | λ, ω and
λ, ω | β.  On breast cancer at α = 1 its slowest directions are the overall scale of β (lag-1
autocorrelation of the slowest linear combination of β 0.98) and the flat intercept moving
together with the coefficients correlated with it (0.89): both are strongly coupled to the n
latent λᵢ, so a data-augmentation sweep moves them in small steps.  Both are cheap to move on the
pseudo-posterior itself, with λ and ω integrated out,

    log π(β | ν) = −2 Σᵢ max(1 − x̃ᵢ'β, 0) − Σⱼ |βⱼ/ν|^α + const   (bayes-svm.md §1.1, σⱼ = 1),

because a move along a line only needs the margins mᵢ = x̃ᵢ'β, which the sweep computes anyway,
and X̃d for its direction d (O(n) per move instead of the O(nk²) of a β | λ, ω draw):

* **scale**: β' = e^ε β, ε ~ N(0, s₀²), accepted with probability
  min{1, π(β' | ν)/π(β | ν) · e^{kε}} (k = dim β).  The map (β, ε) ↦ (e^ε β, −ε) is an
  involution whose Jacobian is e^{kε} and the law of ε is symmetric, so this is a
  Metropolis-Hastings move reversible with respect to π(β | ν) (Green 1995, Biometrika 82:711,
  MH with deterministic proposal maps; it is the scale group move of Liu & Sabatti 2000,
  Biometrika 87:353, as a Metropolis step).  Margins: m' = e^ε m;
* **flat coefficient j**: β' = β + δ dⱼ, δ ~ N(0, sⱼ²), along a direction dⱼ with (dⱼ)ⱼ = 1, a
  random-walk Metropolis move (symmetric proposal) accepted with probability
  min{1, π(β' | ν)/π(β | ν)}.  Margins: m' = m + δ X̃dⱼ.  dⱼ = eⱼ until it is learnt (below),
  then dⱼ = Σeⱼ/Σⱼⱼ with Σ the chain's own covariance of β: the regression of β on βⱼ, along
  which the posterior is widest for a given change of βⱼ.
* **independence**: T proposals yᵢ = μ + Lzᵢ, zᵢ ~ N(0, I_k) independent of the state, from the
  Gaussian q = N(μ, LL') fitted to the chain's own burn-in draws, tried in turn: the chain at x
  moves to yᵢ with probability min{1, w(yᵢ)/w(x)}, w = π(· | ν)/q (Metropolis-Hastings with an
  independence proposal, Tierney 1994, Ann. Stat. 22:1701, §2.3.3).  Each try is a
  Metropolis-Hastings kernel reversible with respect to π(β | ν), and so is their composition
  invariant.  log q(μ + Lz) = −|z|²/2 + const, and the current state's z is L⁻¹(x − μ).
  Margins: X̃yᵢ = X̃μ + (X̃L)zᵢ, one (T, k) × (k, n) product per chain for all tries, O(Tnk).
  The other moves follow the slowest directions one at a time; the remaining autocorrelation at
  α = 1 is spread over many directions (lag-1 spectrum 0.86, 0.80, 0.77, 0.77, … after them), and
  an accepted independence proposal renews all of them at once.  q is Gaussian: lighter-tailed
  than π, so w is unbounded and the move alone is not uniformly ergodic (Mengersen & Tweedie 1996,
  Ann. Stat. 24:101), but it is only one factor of the sweep: in the tails, where it rejects, the
  Gibbs draws and the other moves still move β (a Student-t q has bounded w but accepted less:
  0.16 against 0.20 per try on breast cancer at α = 1, fitted to 20,000 draws).

Why the posterior is unchanged.  Write π(β, λ, ω | ν) for the augmented posterior (its β-marginal
is π(β | ν), §2).  The moves act right after the β | λ, ω draw, and right after them λ and ω are
redrawn from their full conditional given the new β (the τ draw between them integrates ω out
and does not involve λ).  Suppose (β, λ, ω) ~ π(· | ν).  A move reads β only, not λ or ω, and
leaves π(β | ν) invariant, so the moved β' has law π(β | ν); drawing (λ', ω') ~ π(λ, ω | β', ν)
then gives (β', λ', ω') ~ π(· | ν).  The old λ, ω are discarded, never read: this is a
partially collapsed Gibbs step (van Dyk & Park 2008, JASA 103:790) whose collapsed draw is a
Metropolis-Hastings kernel.  That is valid here because the quantities integrated out are redrawn
from their complete conditional straight after the move and before anything reads them (van Dyk
& Jiao 2015, JCGS 24:301, show how an MH step inside a partially collapsed sampler can change the
stationary law when that is not so).  The β | λ, ω step before the moves is unchanged, so each
sweep keeps π invariant and the chain stays irreducible.  The over-relaxed β step starts from the
β that λ and ω were drawn from, i.e. the moved β.

What is learnt, and when.  During burn-in only, each chain tunes s₀ and sⱼ (Robbins-Monro on the
acceptance probability towards 0.44, the optimum for a one-dimensional random walk; Roberts &
Rosenthal 2001, Stat. Sci. 16:351), sets dⱼ once, from its own draws of burn-in sweeps
[B/10, B/2), and at the end of burn-in fits q to its draws of sweeps [B/10, B) (sample mean and
covariance; no independence move before, nor if there are fewer than 4k such draws or the
covariance is not positive definite).  Afterwards nothing changes, so the kept draws come from one time-homogeneous kernel
started where burn-in ended (the adaptation only chose which valid kernel that is).  Each chain
learns from its own draws alone, so chains stay independent and a chain's draws do not depend on
the chains run beside it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

#: Acceptance probability the burn-in tuning aims at.
TARGET_ACCEPT = 0.44
#: Initial proposal sd of the log scale and of each flat coefficient (standardised predictors).
INITIAL_STEP = (0.1, 0.3)
#: Independence proposals per sweep, from the Gaussian fitted to the chain's own burn-in draws.
INDEPENDENCE_TRIES = 4
#: Fewest burn-in draws per coefficient for the Gaussian proposal; with fewer there is no such move.
MIN_DRAWS_PER_COEF = 4


class CollapsedMoves:
    """Scale, flat-coefficient and independence moves of β, λ and ω integrated out, for C chains.

    Call :meth:`step` once per sweep; ``adapt`` is the sweep number during burn-in (``adapt_sweeps``
    of them) and −1 afterwards, when nothing about the moves changes any more.
    """

    def __init__(
        self,
        Xt: NDArray[np.float64],
        pen: NDArray[np.bool_],
        pen_sel: slice | NDArray[np.intp],
        alpha: float,
        chains: int,
        adapt_sweeps: int,
        tries: int = INDEPENDENCE_TRIES,
    ) -> None:
        """X̃ (n, k), the penalised mask and its selector (a slice when contiguous), α ∈ {1, 2},
        the number of chains C and of burn-in sweeps, independence proposals per sweep."""
        n, k = Xt.shape
        self.Xt = Xt
        self.alpha = alpha
        self.k = k
        self.pen_sel = pen_sel
        self.flat_idx = np.flatnonzero(~pen)
        f = self.flat_idx.size
        self.n_moves = 1 + f
        self.tries = tries
        #: standard normals and uniforms :meth:`step` reads per chain
        self.n_normals = self.n_moves + tries * k
        self.n_uniforms = self.n_moves + tries
        steps = [INITIAL_STEP[0]] + [INITIAL_STEP[1]] * f
        self.log_step = np.log(np.array(steps))[:, np.newaxis].repeat(chains, axis=1)
        # direction of the move of flat coefficient j, per chain: eⱼ until re-estimated
        self.dirs = np.zeros((f, chains, k))
        self.dir_cols = np.empty((f, chains, n))  # X̃ dⱼ
        for m, j in enumerate(self.flat_idx):
            self.dirs[m, :, j] = 1.0
            self.dir_cols[m] = Xt[:, j]
        # draws of sweeps [first, last) estimate the posterior covariance for the directions,
        # those of [first, adapt_sweeps) the Gaussian independence proposal N(μ, LL')
        self.cov_window = (adapt_sweeps // 10, adapt_sweeps // 2)
        self.adapt_sweeps = adapt_sweeps
        self.active = np.zeros(chains, dtype=bool)  # chains with a fitted proposal
        self.mean = np.zeros((chains, k))
        self.chol = np.zeros((chains, k, k))  # L, lower triangular
        self.chol_t = np.zeros((chains, k, k))  # L'
        self.chol_inv_t = np.zeros((chains, k, k))  # (L⁻¹)'
        self.margin_map = np.zeros((chains, k + 1, n))  # [(X̃L)'; (X̃μ)']: margins of (z, 1)
        self.try_z = np.ones((chains, tries, k + 1))  # (zᵢ, 1)
        self.try_margins = np.empty((chains, tries, n))
        self.try_hinge = np.empty((chains, tries, n))
        self.sum = np.zeros((chains, k))
        self.sum_sq = np.zeros((chains, k, k))
        self.proposal = np.empty((chains, n))
        self.hinge_terms = np.empty((chains, n))
        self.moved = np.empty((chains, k))

    def _hinge(self, margin: NDArray[np.float64]) -> NDArray[np.float64]:
        """Σᵢ max(1 − mᵢ, 0) per chain, for margins m of shape (C, n)."""
        t = np.subtract(1.0, margin, out=self.hinge_terms)
        np.maximum(t, 0.0, out=t)
        return np.add.reduce(t, axis=1)

    def _prior(self, beta: NDArray[np.float64], nus: NDArray[np.float64]) -> NDArray[np.float64]:
        """Σⱼ |βⱼ/ν|^α over the penalised coefficients, per chain."""
        pen_beta = beta[:, self.pen_sel]
        if self.alpha == 1.0:
            return np.add.reduce(np.abs(pen_beta), axis=1) / nus
        if self.alpha == 2.0:
            return np.add.reduce(np.square(pen_beta), axis=1) / (nus * nus)
        return np.add.reduce(np.abs(pen_beta) ** self.alpha, axis=1) / nus**self.alpha

    def _accept(
        self, log_ratio: NDArray[np.float64], u: NDArray[np.float64], move: int, adapt: int
    ) -> NDArray[np.bool_]:
        """u < min(1, e^{log_ratio}); during burn-in (adapt = sweeps so far, else −1) tune the step."""
        prob = np.exp(np.minimum(log_ratio, 0.0))
        if adapt >= 0:
            self.log_step[move] += (prob - TARGET_ACCEPT) / np.sqrt(adapt + 1.0)
        return u < prob

    def _learn_directions(self, beta: NDArray[np.float64], adapt: int) -> None:
        """Accumulate β over the covariance window; at its end set dⱼ = Σ eⱼ / Σⱼⱼ per chain."""
        first, last = self.cov_window
        if first <= adapt:
            self.sum += beta
            self.sum_sq += beta[:, :, np.newaxis] * beta[:, np.newaxis, :]
        if adapt == self.adapt_sweeps - 1:
            self._fit_proposal(self.adapt_sweeps - first)
        if adapt != last - 1 or last - first < 3:
            return
        count = last - first
        mean = self.sum / count
        cov = self.sum_sq / count - mean[:, :, np.newaxis] * mean[:, np.newaxis, :]
        for m, j in enumerate(self.flat_idx):
            for c in range(beta.shape[0]):
                if cov[c, j, j] > 0.0 and np.all(np.isfinite(cov[c, :, j])):
                    self.dirs[m, c] = cov[c, :, j] / cov[c, j, j]
                    self.dirs[m, c, j] = 1.0
                    np.matmul(self.Xt, self.dirs[m, c], out=self.dir_cols[m, c])

    def _fit_proposal(self, count: int) -> None:
        """Set each chain's proposal N(μ, Σ) to the mean and covariance of its last ``count`` draws."""
        k = self.k
        if self.tries == 0 or count < MIN_DRAWS_PER_COEF * k:
            return
        for c in range(self.mean.shape[0]):
            mean = self.sum[c] / count
            cov = (self.sum_sq[c] - count * np.outer(mean, mean)) / (count - 1)
            if not np.all(np.isfinite(cov)):
                continue
            try:
                chol = np.linalg.cholesky(cov)
            except np.linalg.LinAlgError:
                continue
            self.mean[c] = mean
            self.chol[c] = chol
            self.chol_t[c] = chol.T
            self.chol_inv_t[c] = np.linalg.inv(chol).T
            self.margin_map[c, :k] = (self.Xt @ chol).T
            np.matmul(self.Xt, mean, out=self.margin_map[c, k])
            self.active[c] = True

    def _independence(
        self,
        beta: NDArray[np.float64],
        margin: NDArray[np.float64],
        nus: NDArray[np.float64],
        log_target: NDArray[np.float64],
        z: NDArray[np.float64],
        u: NDArray[np.float64],
    ) -> None:
        """Successive independence Metropolis-Hastings moves to μ + Lzᵢ, i = 1..tries, in place."""
        C, k = beta.shape
        zs = z.reshape(C, self.tries, k)
        proposals = np.matmul(zs, self.chol_t)
        proposals += self.mean[:, np.newaxis, :]
        self.try_z[:, :, :k] = zs
        margins = np.matmul(self.try_z, self.margin_map, out=self.try_margins)
        hinge = np.subtract(1.0, margins, out=self.try_hinge)
        np.maximum(hinge, 0.0, out=hinge)
        pen = proposals[:, :, self.pen_sel]
        if self.alpha == 1.0:
            prior = np.add.reduce(np.abs(pen), axis=2) / nus[:, np.newaxis]
        else:
            prior = np.add.reduce(np.square(pen), axis=2) / (nus * nus)[:, np.newaxis]
        # log weight π(y)/q(y), with q(y) ∝ exp(−|z|²/2) for y = μ + Lz
        weight = -2.0 * np.add.reduce(hinge, axis=2) - prior
        weight += 0.5 * np.einsum("cij,cij->ci", zs, zs)
        z_now = np.matmul((beta - self.mean)[:, np.newaxis, :], self.chol_inv_t)[:, 0]
        current = log_target + 0.5 * np.einsum("ij,ij->i", z_now, z_now)
        log_u = np.log(u).tolist()
        # a few scalars per chain: a Python loop beats numpy calls on (C,) arrays here
        for c, (active, now, w, lu) in enumerate(
            zip(self.active.tolist(), current.tolist(), weight.tolist(), log_u, strict=True)
        ):
            chosen = -1
            for i in range(self.tries if active else 0):
                if lu[i] < w[i] - now:
                    chosen, now = i, w[i]
            if chosen >= 0:
                beta[c] = proposals[c, chosen]
                margin[c] = margins[c, chosen]

    def step(
        self,
        beta: NDArray[np.float64],
        margin: NDArray[np.float64],
        nus: NDArray[np.float64],
        z: NDArray[np.float64],
        u: NDArray[np.float64],
        adapt: int,
    ) -> None:
        """One scale move, one move per flat coefficient, then the independence moves, on β (C, k)
        and its margins X̃β (C, n) in place; z (C, n_normals) and u (C, n_uniforms) are standard
        normals and uniforms."""
        hinge = self._hinge(margin)
        prop = self.proposal
        eps = np.exp(self.log_step[0]) * z[:, 0]
        g = np.exp(eps)
        np.multiply(margin, g[:, np.newaxis], out=prop)
        new_hinge = self._hinge(prop)
        prior = self._prior(beta, nus)
        log_ratio = -2.0 * (new_hinge - hinge) - (g**self.alpha - 1.0) * prior + self.k * eps
        ok = self._accept(log_ratio, u[:, 0], 0, adapt)
        np.copyto(margin, prop, where=ok[:, np.newaxis])
        beta *= np.where(ok, g, 1.0)[:, np.newaxis]
        hinge = np.where(ok, new_hinge, hinge)
        prior = np.where(ok, g**self.alpha * prior, prior)
        moved = self.moved
        for m in range(1, self.n_moves):
            delta = np.exp(self.log_step[m]) * z[:, m]
            np.multiply(delta[:, np.newaxis], self.dir_cols[m - 1], out=prop)
            prop += margin
            new_hinge = self._hinge(prop)
            np.multiply(delta[:, np.newaxis], self.dirs[m - 1], out=moved)
            moved += beta
            new_prior = self._prior(moved, nus)
            log_ratio = -2.0 * (new_hinge - hinge) - (new_prior - prior)
            ok = self._accept(log_ratio, u[:, m], m, adapt)
            np.copyto(margin, prop, where=ok[:, np.newaxis])
            np.copyto(beta, moved, where=ok[:, np.newaxis])
            hinge = np.where(ok, new_hinge, hinge)
            prior = np.where(ok, new_prior, prior)
        if self.tries and self.active.any():
            n_mv = self.n_moves
            self._independence(beta, margin, nus, -2.0 * hinge - prior, z[:, n_mv:], u[:, n_mv:])
        if adapt >= 0:
            self._learn_directions(beta, adapt)
