"""Metropolis moves of β along its slow directions with the latent λ and ω integrated out.

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
Rosenthal 2001, Stat. Sci. 16:351) and sets dⱼ once, from its own draws of burn-in sweeps
[B/4, B/2).  Afterwards nothing changes, so the kept draws come from one time-homogeneous kernel
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


class CollapsedMoves:
    """Scale and flat-coefficient Metropolis moves of β, λ and ω integrated out, for C chains.

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
    ) -> None:
        """X̃ (n, k), the penalised mask and its selector (a slice when contiguous), α ∈ {1, 2},
        the number of chains C and of burn-in sweeps."""
        n, k = Xt.shape
        self.Xt = Xt
        self.alpha = alpha
        self.k = k
        self.pen_sel = pen_sel
        self.flat_idx = np.flatnonzero(~pen)
        f = self.flat_idx.size
        self.n_moves = 1 + f
        steps = [INITIAL_STEP[0]] + [INITIAL_STEP[1]] * f
        self.log_step = np.log(np.array(steps))[:, np.newaxis].repeat(chains, axis=1)
        # direction of the move of flat coefficient j, per chain: eⱼ until re-estimated
        self.dirs = np.zeros((f, chains, k))
        self.dir_cols = np.empty((f, chains, n))  # X̃ dⱼ
        for m, j in enumerate(self.flat_idx):
            self.dirs[m, :, j] = 1.0
            self.dir_cols[m] = Xt[:, j]
        # draws of sweeps [first, last) estimate the posterior covariance for the directions
        self.cov_window = (adapt_sweeps // 4, adapt_sweeps // 2)
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
        if first <= adapt < last:
            self.sum += beta
            self.sum_sq += beta[:, :, np.newaxis] * beta[:, np.newaxis, :]
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

    def step(
        self,
        beta: NDArray[np.float64],
        margin: NDArray[np.float64],
        nus: NDArray[np.float64],
        z: NDArray[np.float64],
        u: NDArray[np.float64],
        adapt: int,
    ) -> None:
        """One scale move, then one move per flat coefficient, on β (C, k) and its margins X̃β
        (C, n) in place; z, u (C, n_moves) are standard normals and uniforms."""
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
        if adapt >= 0:
            self._learn_directions(beta, adapt)
