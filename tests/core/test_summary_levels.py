"""The roundness base measure (scalefree.LEVELS, issue 12) is wired in: on tied integer data the releases land on
the tied values.  That the summary route follows it draw for draw is tests/core/test_summary.py's comparison with
the list route, which runs at the default LEVELS."""

from __future__ import annotations

import numpy as np
import pytest

from dpsql.core import Params, get_method, scalefree
from dpsql.core.batch import Batch
from dpsql.core.registry import budget_of
from dpsql.core.scalefree import run_quantile
from dpsql.noise import Rng


def test_levels_pull_medians_of_tied_integers_onto_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """dep_delay-like data: integer minutes with a tie block whose upper edge lies 24 ranks above the median's
    target (n = 10**4, eps = 1): the uniform measure mostly misses the tied value, Z = 16 returns it (up to the
    code's cell, ~1e-10)."""
    r = np.random.default_rng(4)
    x = np.concatenate([np.full(4321, 15.0), np.full(703, 18.0), np.full(4976, 27.0)])
    r.shuffle(x)
    b = Batch.from_lists([x] * 200)
    params = Params(epsilon=1.0, p=0.5)
    budget = budget_of(get_method("quantile", "scalefree"), params)
    hits = []
    for z in (0, 16):
        monkeypatch.setattr(scalefree, "LEVELS", z)
        got = run_quantile(b, budget, params, Rng.seeded(9))
        hits.append(float(np.mean(np.abs(got - 18.0) < 1e-9)))  # a code decodes to its cell's midpoint
    assert hits[0] < 0.2 and hits[1] > 0.9, hits
