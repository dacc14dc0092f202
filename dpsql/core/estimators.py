"""The method table: every estimator family's exported ``METHODS``, in one place (issue 16).

A family module declares its methods as data (a ``METHODS`` tuple of :class:`~dpsql.core.registry.Method`) and
registers nothing when imported.  :mod:`dpsql.core` hands :data:`METHODS` to the registry (on first use, so that
``import dpsql`` does not load the families), and the registry never imports the families that import it.
"""

from __future__ import annotations

from . import asymmetric, clipped, instance, moments, scalefree, smooth, subset, universal
from .registry import Method

__all__ = ["FAMILIES", "METHODS"]

#: the families, in the order their methods are listed (:func:`~dpsql.core.registry.methods`)
FAMILIES = (
    universal,  # seed 003 (bound-free), and the count
    asymmetric,  # seed 002
    clipped,  # plain clipped baseline with user bounds
    instance,  # seed 004
    scalefree,  # accuracy study R1/R2 (the defaults of sum, mean, quantile, iqr)
    moments,  # dp_var's default: seed 002 below n eps = 30,000, scale-free moments above
    smooth,  # seed 001
    subset,  # seed 000
)

METHODS: tuple[Method, ...] = tuple(m for family in FAMILIES for m in family.METHODS)
