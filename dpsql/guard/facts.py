"""What the guard's analyses find: one frozen fact object per analysis, threaded explicitly by the driver.

``guard.plan`` runs the analyses in order (``guard.ANALYSES``); each is a function ``analysis(facts) -> fact``
of the :class:`Facts` found so far that either raises :class:`~dpsql.errors.PrivacyError` or returns its own
frozen fact (``None`` for a check that only refuses), which the driver adds with :meth:`Facts.add`.  The
rewrites after them (``guard.REWRITES``) are pure functions ``rewrite(tree, facts) -> tree``: each edits a copy
of its input (:func:`~dpsql.guard.context.editable`) and finds there the nodes the facts name, which belong to
the analysed tree (``Facts.tree``, never edited).

Facts name nodes of the analysed tree and index them by ``id(node)``; ``Facts.tree`` keeps those nodes alive.
"""

from __future__ import annotations

import dataclasses
import decimal
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sqlglot import exp

from .catalog import Catalog, TableInfo


@dataclass(frozen=True)
class ScopeInfo:
    """Facts about one SELECT (or set operation) of the query (built by the lineage pass, then never changed)."""

    kind: str  # "public" | "protected" (row level, carries units) | "noisy" (DP output)
    columns: list[str] = field(default_factory=list)
    unit_cols: set[str] = field(default_factory=set)  # output columns that are the privacy unit itself
    origins: dict[str, tuple[TableInfo, str]] = field(default_factory=dict)  # passthrough of a protected column
    tables: list[TableInfo] = field(default_factory=list)  # protected tables read (transitively)


#: alias -> (FROM item, its ScopeInfo, the sqlglot source) of one SELECT
Sources = Mapping[str, tuple[exp.Expression, ScopeInfo, object]]


@dataclass(frozen=True)
class Site:
    """A SELECT with dp_* calls (``protected``: over protected rows)."""

    select: exp.Select
    protected: bool


@dataclass(frozen=True)
class Lineage:
    """The lineage pass: every scope classified, the sources of every SELECT, the SELECTs reading protected
    rows and the dp_* aggregations, children first."""

    catalog: Catalog
    info: Mapping[int, ScopeInfo]  # id(scope expression) -> info
    sources: Mapping[int, Sources]  # id(select) -> its sources
    private: tuple[exp.Select, ...]  # selects reading protected rows
    aggregations: tuple[Site, ...]


@dataclass(frozen=True)
class Grouping:
    """How one aggregation over protected rows is keyed and bounded (the groups pass)."""

    keys: tuple[exp.Expression, ...]
    domains: tuple[exp.Expression | None, ...]  # one public relation per key, or None
    unit: exp.Expression
    max_rows: int
    max_groups: int
    selection: bool  # DP partition selection for undeclared keys

    @property
    def multiplier(self) -> int:
        return self.max_rows * (self.max_groups if self.keys else 1)


@dataclass(frozen=True)
class Groups:
    """The groups pass: a :class:`Grouping` per aggregation over protected rows, and the privacy units the
    bounding needs projected out of subqueries (``(select, item)``: append ``item`` to ``select``'s list)."""

    by_select: Mapping[int, Grouping]
    units: tuple[tuple[exp.Select, exp.Expression], ...] = ()


@dataclass(frozen=True)
class DpCall:
    """One dp_* call: where it is, its parsed parameters and its cost."""

    node: exp.Anonymous
    function: str
    aggregate: str
    params: Mapping[str, object] = field(default_factory=dict)  # name -> float or str
    texts: Mapping[str, str] = field(default_factory=dict)  # name -> literal text (exact decimals)
    multiplier: int = 1
    method: str = ""
    notion: str = ""
    value: float = 0.0  # eps (pure) or rho (zcdp) per unit of sensitivity, as the registry declares
    cost: decimal.Decimal = decimal.Decimal(0)
    purpose: str = "release"


@dataclass(frozen=True)
class Parameters:
    """The parameters pass: the dp_* calls of each aggregation, parsed and costed, in order."""

    by_select: Mapping[int, tuple[DpCall, ...]]


@dataclass(frozen=True)
class Selected:
    """Partition selection of one aggregation: its count mechanism, the epsilon text and the threshold."""

    call: DpCall
    epsilon: str
    threshold: float


@dataclass(frozen=True)
class Selection:
    """The partition-selection pass: the aggregations that select their groups, and the delta they spend."""

    by_select: Mapping[int, Selected]
    delta: decimal.Decimal = decimal.Decimal(0)


@dataclass(frozen=True)
class Cost:
    """The cost pass: the query's total cost (eps or rho), rounded up once."""

    total: decimal.Decimal


@dataclass(frozen=True)
class Facts:
    """Everything known about one query: its text, the catalog, the analysed tree and its scopes, and the fact of
    each analysis that has run (``None`` before)."""

    sql: str
    catalog: Catalog
    tree: exp.Expression
    scopes: tuple = ()  # sqlglot Scope objects, children first
    lineage: Lineage | None = None
    groups: Groups | None = None
    parameters: Parameters | None = None
    selection: Selection | None = None
    cost: Cost | None = None

    def add(self, name: str | None, fact: object) -> Facts:
        """These facts plus ``fact`` under ``name`` (``None``: a check, nothing to add)."""
        return self if name is None else dataclasses.replace(self, **{name: fact})

    def grouping(self, site: Site) -> Grouping | None:
        return self.groups.by_select.get(id(site.select)) if self.groups is not None and site.protected else None

    def multiplier(self, site: Site) -> int:
        grouping = self.grouping(site)
        return 1 if grouping is None else grouping.multiplier

    def selected(self, site: Site) -> Selected | None:
        return self.selection.by_select.get(id(site.select)) if self.selection is not None else None

    def calls_of(self, site: Site) -> tuple[DpCall, ...]:
        """The calls of one aggregation: its dp_* calls, then its partition selection's count."""
        calls = self.parameters.by_select.get(id(site.select), ()) if self.parameters is not None else ()
        selected = self.selected(site)
        return calls + ((selected.call,) if selected is not None else ())

    @property
    def calls(self) -> list[DpCall]:
        return [c for site in self.lineage.aggregations for c in self.calls_of(site)]


def frozen_map(d: dict) -> Mapping:
    """A read-only view of a dict built by a pass."""
    return MappingProxyType(dict(d))
