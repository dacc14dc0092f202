"""Each guard pass on its own fixtures: tests/guard/fixtures/<pass>.sql, input query -> what the pass produces.

A fixture file holds cases of the form::

    -- catalog: hospital
    SELECT ... (the input query, one or more lines)
    -- expect:
    ... (the rewritten SQL, a summary of the facts found, ``ok``, or ``error DPSQL-E0xx``)

``passes.PASSES`` says how each pass is run (the passes before it prepare its input) and what it returns.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from passes import CATALOGS, PASSES, outcome

FIXTURES = Path(__file__).parent / "fixtures"


def read_fixtures(path: Path) -> list[tuple[str, str, str]]:
    """``(catalog, query, expected)`` of each case of one fixture file."""
    cases = []
    for block in path.read_text().split("-- catalog: ")[1:]:
        head, _, rest = block.partition("\n")
        query, _, expected = rest.partition("-- expect:\n")
        lines = [ln for ln in expected.splitlines() if not ln.startswith("-- ")]
        cases.append((head.strip(), query.strip(), "\n".join(lines).strip()))
    return cases


CASES = [pytest.param(path.stem, *case, id=f"{path.stem}-{i}")
         for path in sorted(FIXTURES.glob("*.sql")) for i, case in enumerate(read_fixtures(path))]


def test_every_pass_has_fixtures() -> None:
    assert {p.stem for p in FIXTURES.glob("*.sql")} == set(PASSES)
    for name in PASSES:
        assert len(read_fixtures(FIXTURES / f"{name}.sql")) >= 3, name


@pytest.mark.parametrize(("name", "catalog", "query", "expected"), CASES)
def test_pass_on_its_fixtures(name: str, catalog: str, query: str, expected: str) -> None:
    assert catalog in CATALOGS
    assert outcome(name, query, catalog) == expected
