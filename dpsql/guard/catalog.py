"""What the guard knows about the database: protected and public tables, declared from metadata only.

The session fills a :class:`Catalog` from dpsql's policy tables; the guard never looks at the data.

>>> t = TableInfo("visits", "protected", {"patient_id": "INTEGER", "cost": "DOUBLE"}, privacy_unit="patient_id")
>>> Catalog({"visits": t}).tables["visits"].max_rows_per_unit
1
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["TableInfo", "Catalog"]


@dataclass(frozen=True)
class TableInfo:
    """One registered table.  ``privacy_unit=None`` on a protected table: each row is its own unit."""

    name: str
    kind: Literal["protected", "public"]
    columns: dict[str, str]
    privacy_unit: str | None = None
    max_rows_per_unit: int = 1
    max_groups_per_unit: int = 1
    public_keys: dict[str, tuple] = field(default_factory=dict)
    #: public tables only, measured by the session from the (public) data: row count and, per column, the
    #: largest number of rows sharing one value (the join fan-out bound of ``guard.fanout``; a session
    #: measures a column only when the guard first asks)
    rows: int | None = None
    multiplicity: Mapping[str, int] = field(default_factory=dict)

    @property
    def protected(self) -> bool:
        return self.kind == "protected"

    def unit_identity(self) -> str:
        """Two protected tables share a unit iff these strings are equal (row-level tables never do)."""
        return f"col:{self.privacy_unit.lower()}" if self.privacy_unit else f"row:{self.name}"


@dataclass(frozen=True)
class Catalog:
    """All registered tables plus the accounting in force for the session."""

    tables: dict[str, TableInfo]
    accounting: Literal["pure", "zcdp"] = "pure"
    delta: float = 0.0
    max_query_epsilon: float | None = None
    max_fanout: int = 1000  # rows of a public relation one protected row may meet in a join (E043)
    #: the data owner's opt-in for this principal (issue 19): plain COUNT/SUM/AVG over protected rows become
    #: dp_* calls with this epsilon per call (the text of a decimal literal); None: they are refused (E021)
    plain_aggregate_epsilon: str | None = None

    def get(self, name: str) -> TableInfo | None:
        return self.tables.get(name.lower())
