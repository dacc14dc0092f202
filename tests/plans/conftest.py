"""tests/plans: the summary passes for every group unless a test sets ``plans.SMALL_ROWS`` (the hybrid route reads
groups below it as rows and runs the list route's code: the passes would go untested on these small tables)."""

from __future__ import annotations

import pytest

from dpsql import plans


@pytest.fixture(autouse=True)
def _passes_for_every_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plans, "SMALL_ROWS", 0.0)
