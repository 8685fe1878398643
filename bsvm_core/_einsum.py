"""``np.einsum`` without its Python layer, for the small sums a fit takes many of.

``np.einsum(..., optimize=False)`` hands its operands straight to the C function
``c_einsum`` after an ``__array_function__`` dispatch and a Python wrapper (~0.8 µs a call on
arrays of a few hundred entries, as much as the sum itself); calling ``c_einsum`` gives the same
array, bit for bit, without them. Where numpy does not expose it, ``np.einsum`` itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _c_einsum() -> Callable[..., Any]:
    """numpy's C einsum (``numpy._core.multiarray.c_einsum``; ``numpy.core`` before numpy 2)."""
    try:
        from numpy._core.multiarray import c_einsum
    except ImportError:  # numpy < 2
        try:
            from numpy.core.multiarray import c_einsum
        except ImportError:
            return np.einsum
    return c_einsum


einsum: Callable[..., Any] = _c_einsum()
"""``einsum(subscripts, *operands, out=None)``: ``np.einsum`` with ``optimize=False``."""
