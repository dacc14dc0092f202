"""Summary plans (issue 17): ``run(con, sql)`` answers the default dp_median, dp_quantile(x, p), dp_iqr, dp_mean,
dp_sum, dp_var and dp_stddev of a simple grouped query with native DuckDB passes over per-group summaries for large
groups and one rows pass for the small ones (the hybrid route, below) instead of shipping each group to Python with
``list(x)``; the mechanism runs in Python on the summaries (:mod:`dpsql.core.summary`, whose docstring has the
design and the privacy argument) or, for the small groups, on their rows.  Same output law as the list route
(below: the matching's draws differ, its law does not).

Compiled: ``SELECT k1, ..., dp_median(x, epsilon := e) [AS a], ... FROM <from> [WHERE ...] [GROUP BY k1, ...]``
where every other select item is a GROUP BY expression, and each dp call is ``dp_median(x, epsilon := e)`` or
``dp_quantile(x, p, epsilon := e)`` (p a literal in (0, 1)) with at most ``method := 'scalefree'`` besides (no
bounds, no interval).  Parameters may also come by position in the macros' order (``dpsql.surface.NAMED``:
``dp_median(x, e)``, ``dp_quantile(x, p, e)``); a NULL one is one not given.  At p != 1/2
(:func:`dpsql.core.summary.quantile`) the groups whose released count routes them "wide" (large groups) take
the passes below; the "near" ones (small released counts) are read as rows with the hybrid route's small groups.
``dp_iqr(x, epsilon := e)`` (same named arguments) is :func:`dpsql.core.summary.iqr`: Q1 and Q3 of one released
count, one floor and (near) one centre, routed as a quantile at p = 1/4; per wide class two bucket
passes per quartile, the first bucket pass and the tail pass shared.
``dp_mean(x, epsilon := e)`` and ``dp_sum(x, epsilon := e)`` (same named arguments) are
:func:`dpsql.core.summary_mean.mean` / ``sum`` on :class:`MeanDuckSource` (its passes: the radius
histogram, the derived ``|x - c|`` for the cap, the clipped fixed-point sums); their small groups join the rows pass.
``dp_var(x, epsilon := e)`` and ``dp_stddev(x, epsilon := e)`` (at most ``method := 'scalefree'`` (the default) or
``'asymmetric'`` besides): per group by the released count (:mod:`dpsql.core.moments`), the asymmetric class is
:func:`dpsql.core.summary_var.variance` (its square root) on :class:`dpsql.plans.var.DuckVarSource`: two passes (the
top-k edges, then the core sums around the core's midpoint) for large groups; their small groups join the rows pass;
the top class (``n_hat eps >= VAR_TOP``) is two dp_mean plans (:func:`_moments`: the mean, then the mean of
``(x - c)**2``).  ``'asymmetric'`` sends every group to the first.
Anything else runs as written through the plain macros (``dpsql.install(con)`` must have run): the fallback.
The guarded front doors (``dpsql.connect``'s sessions: the shell, ``dpsql query``, the server) use it too: their
executor runs the guard's rewritten SQL through :func:`run` with ``materialize=True`` when it compiles
(:meth:`dpsql.executor.Executor.run`; :func:`materialized`: every pass must see the same rows).

Hybrid route (:data:`SMALL_ROWS`).  The count pass gives every call its released count first
(:func:`dpsql.core.summary.released_count`, one draw per call, in the calls' order); the groups a call reads as
rows (:func:`dpsql.core.summary.row_groups`: released count below SMALL_ROWS, and at p != 1/2 the near route's)
of all calls on the same value expression come back in ONE rows pass (:meth:`DuckSource.fetch_rows`; none when
no released count routes a group there) when they hold at most :data:`ROWS_PASS_ROWS` released rows together.
Above it (memory, issue 17: 10**8 rows in 10**5 groups of 10**3 are all "small") each call streams its rows in
pieces: the core announces the parts of ~``core.summary.ROWS_CHUNK`` released rows it will run the list code on,
in its order (:func:`dpsql.core.summary.announce_rows`), and :meth:`DuckSource.will_batch` cuts them into
consecutive pieces of about ROWS_PASS_ROWS released rows (cut where the parts' running total crosses a multiple
of it), each fetched by its own rows pass (joined to the piece's registered groups, as every pass) when first
asked for and dropped before the next: at most one piece's rows are held (sorted within groups part by part,
:class:`_Piece`).  The pieces reorder no draw (the core asks for the same parts in the same order; only where the
rows come from changes), so the releases are the single pass's bit for bit; the pieces, their number and their
statements are functions of the released counts (post-processing, no cost).  Calls on the same value then read
the rows once per call (not shared: sharing a piece would interleave the calls' draws, and each aggregate runs its
classes in its own order).  Each call then continues from its released count
(:func:`dpsql.core.summary.median` with ``n_hat``): per class the small groups run the list route's code for a
class on their rows in Python (:func:`~dpsql.core.scalefree.floor_exponent` with the floor's Poisson rate, then
:func:`~dpsql.core.scalefree.quantile_ci`), the others the passes below.  Why the law is the list route's: a
group's release is a function of its rows and its own draws only (groups are disjoint, their mechanisms
independent), and each group runs the list route's mechanisms with the list route's shares and inputs, on
either side of the split (the passes: core.summary's argument; the rows: the list route's code itself).  The
split is post-processing of the released count (as the classes and the rate classes), so the cost stays
epsilon per group, the count drawn once.  Why a split: below FLOOR_KEEP rows the floor runs at rate 1, and the
passes sort every row in a window and scan it three more times, where shipping the rows once and running the
core in numpy is cheaper (10**4 groups of 10**3 rows: benchmarks/results/plans.md).  Timing: the split, the rows
pass and the classes are functions of the released counts; the rows' Python work follows the groups' sizes.

Passes per dp call: one count pass (shared by the calls' classes), then per class of groups (see the core
module) a gap-histogram pass over a random matching (two per rate class below 1 when the floor is subsampled:
the coins, then the matching of the kept rows; below), which also counts the rows for the first of the three
bucket histograms (by sign, floor exponent and top mantissa bits: no floor needed; ``DuckSource.FUSE_FIRST``),
two more bucket-histogram passes and one tail-count pass, whatever the data (the classes present are a
function of released counts).  The bucket histograms' shifts are per group (:func:`dpsql.core.summary.ladder`:
functions of the released count and of epsilon, never of the rows), passed to DuckDB as a column of the
per-group parameters (a literal when all groups share one).

The matching (cost and proof sketch).  The gap pass gives every row of its groups one 64-bit word from the OS
CSPRNG (:func:`matching_words`: AES-CTR streams keyed from ``os.urandom``, as many as the groups have rows by
the count pass, streamed to DuckDB as an Arrow reader and joined by ``POSITIONAL JOIN``: row i of the rows'
join with the groups, in whatever order DuckDB produces it, gets word i), orders each group by its words (a
window sort on a UBIGINT) and pairs consecutive rows.  A pass in which some
group has two equal words is voided and rerun with new words.  Under a seeded test generator the words come
from a child generator seeded by one word of it.

* Law: the words are i.i.d. uniform and independent of the data; which row gets which word depends on the
  join's output order only, never on the words, so each group's rows carry i.i.d. uniform words.  The pairing is a
  function of the words alone, equivariant (relabelling the rows relabels the matching) and always a maximal
  matching; the words' law is exchangeable, and so is the event "no tie" the rejection conditions on, so the
  matching's law is invariant under every permutation of the rows.  The symmetric group acts transitively on
  the maximal matchings of n rows, so that law is the uniform one: the law of
  :func:`dpsql.core.ranges.random_pairs`, independent of the values (groups are independent of each other,
  also given "no tie anywhere").  The floor, and so every release, has exactly the list route's law; only the
  draws differ (the list route shuffles with the generator), so releases are equal in law, not byte for byte
  (tests/plans/test_plans.py: byte-identical to core.summary's reference source on the same words, KS and
  chi2 against the list route over many runs; tests/plans/test_matching.py: the matchings' law).
* Add/remove: seed 003's coupling (:func:`~dpsql.core.ranges.iqr_lower_bound`) couples the two uniform
  matching laws on D and D + r, so it holds unchanged: one gap leaves and at most one joins, the SVT queries
  move by at most 16, the floor is eps_bound-DP, and the release costs what the list route's does (epsilon,
  pure).  What the proof must not see is a matching that depends on the values, or one that keeps chosen rows
  adjacent under every draw: ordering by a hash of the value (equal values adjacent: with every value twice,
  all gaps are 0 on D, while on D + r every pair after r straddles two values), or by DuckDB's
  ``hash(rowid, salt)`` with a random salt: that hash is XOR-separable (``hash(i, s) = F(i) xor G(s)``), so a
  salt only flips bits of a fixed per-row value, the order is a trie order of ``F`` with flipped branches, and
  rows whose ``F`` share a long prefix are adjacent under every salt (four rows can be matched one way for all
  2**64 salts, tests/plans/test_matching.py).  On a table whose layout puts equal values in such rows an added
  row shifts the parity of every later pair and the gap histogram moves by up to n/2: the coupling, hence the
  floor's privacy proof, fails.  (A keyed MD5 of a row id would be a sound PRF but costs 1.5-3x the sort
  again; ``hash(rowid + salt)`` is a mixer, not a PRF.)
* Ties and timing: a rerun happens with probability at most ``sum_g n_g (n_g - 1) 2**-65`` (2.7e-6 at 10**7
  rows), a function of the group sizes only, never of the values; its only trace is one more pass.
* Subsampled floor (``scalefree.FLOOR_SAMPLE``; :meth:`DuckSource._gap_subsampled`): a group whose released
  count gives it a rate ``eta = 2**-k < 1`` (:func:`dpsql.core.scalefree.floor_rate`: a function of n_hat and
  epsilon, so are the classes and the number of passes) has its matching drawn on a Poisson subsample.  Coins:
  every row gets a fresh CSPRNG word as above and is kept iff the word is below ``2**(64 - k)``: probability
  exactly eta (a power of two), independently per row, a function of the words alone, never of the values or
  of the row order's relation to them; the kept rows are fixed from then on (they come back to Python and are
  the next pass's input).  Matching: the kept rows get fresh words, are ordered by them per group and paired
  (the argument above, verbatim, over the kept rows: uniform given the subsample); a tie voids this second pass
  only, so the rejection conditions the order, never the coins (rejecting the coins' pass instead would tilt
  the subsample's size law by P(no tie | size)).  So the kept set is exactly Poisson(eta) and its matching
  uniform: the list route's law (:func:`dpsql.core.helpers.subsample` then
  :func:`~dpsql.core.ranges.random_pairs`), and the amplification argument of
  :func:`~dpsql.core.scalefree.floor_exponent` holds unchanged (the floor's SVTs at ``amplified(eps, eta)``;
  cost eps).  Timing: the coin pass scans every row of the class (as the full pass did); the sort and the
  second pass see Binomial(n, eta) rows, a law fixed by n.  The first bucket histogram, which the rate-1 pass
  counts over the window's rows, is counted in the coin pass's statement over every valid row (a second scan
  of the source, no keys, no sort; one BIGINT key per row from the value's IEEE bits, :func:`_exm_key`, decoded
  after the aggregate).  Measured at 10**7 lognormal rows (min of 3, shared machine): one group, that statement
  0.36 s (0.67 s with log2 / pow per row), of which ~0.10 s the coins (words ~0.03 s, positional join ~0.02 s)
  and ~0.14 s the histogram, about half of it the hash aggregate over (group, key); 16 groups 0.57 s (0.96 s):
  the aggregate's cost grows with its keys (16 groups x ~5,000 (exponent, bits) keys).
* Cost per pass: a word per row from AES-CTR (~0.06 s per 10**7), a positional join, one window sort of every valid
  row by a UBIGINT (as fast as the sort on a native hash; the two words per row from a Python UDF before were
  ~3x slower, DuckDB could not run the UDF in parallel).  Memory: the sort's rows plus 8 bytes per row.
  Measured in benchmarks/results/plans.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
import sqlglot
from sqlglot import exp

from ..core import ParameterError, Params, get_method, primitives, summary_mean
from ..core import moments as core_moments
from ..core import summary as core_summary
from ..core import summary_var as core_var
from ..core.batch import Batch, SortedBatch, clean, take_groups
from ..core.primitives import fixed_point_grid
from ..core.registry import validate
from ..core.summary_mean import RADIUS_QUERIES
from ..noise import Rng, system_rng
from ..surface import NAMED
from .var import DuckVarSource

__all__ = ["run", "compile_query", "materialized", "Plan", "Call", "DuckSource", "MeanDuckSource"]

_DP = {"dp_median": None, "dp_quantile": 0.5, "dp_iqr": None, "dp_mean": None, "dp_sum": None}
#: dp_mean / dp_sum: dpsql.core.summary_mean through MeanDuckSource (below)
_MEAN_SUM = {"dp_mean": "mean", "dp_sum": "sum"}
#: dp_var / dp_stddev (dpsql.core.moments' routes: dpsql.core.summary_var through dpsql.plans.var.DuckVarSource for
#: the asymmetric class, two dp_mean plans for the top class)
_VAR = {"dp_var": "var", "dp_stddev": "stddev"}
_DP.update(dict.fromkeys(_VAR))
_ALLOWED_ARGS = {"expressions", "from", "from_", "where", "group", "joins", "kind", "hint", "operation_modifiers",
                 "exclude"}


@dataclass(frozen=True)
class Call:
    """One compiled dp call: its value expression (SQL), epsilon and output column name; ``p`` the level (dp_iqr:
    the tuple :data:`dpsql.core.summary.IQR_PS`, what released_count and row_groups take)."""

    value: str
    epsilon: float
    name: str
    p: float | tuple[float, ...] = 0.5
    aggregate: str = "quantile"  # or "iqr", "mean", "sum", "var", "stddev"
    method: str = ""  # dp_var / dp_stddev: "scalefree" (the default) or "asymmetric"


@dataclass(frozen=True)
class Plan:
    """A compiled query: the FROM/WHERE text, the GROUP BY key expressions and the output columns in order
    (``("key", i, name)`` or ``("dp", j, name)``)."""

    source: str
    keys: tuple[str, ...]
    columns: tuple[tuple[str, int, str], ...]
    calls: tuple[Call, ...]
    #: the query's text draws (:func:`volatile`): :func:`run` materializes its input by default
    draws: bool = False


def _literal_number(node: exp.Expression) -> float | None:
    neg = isinstance(node, exp.Neg)
    node = node.this if neg else node
    if isinstance(node, exp.Literal) and not node.is_string:
        v = float(node.this)
        return -v if neg else v
    return None


def _call(node: exp.Expression, name: str) -> Call | None:
    fn = node.name.lower() if isinstance(node, exp.Anonymous) else None
    if fn not in _DP:
        return None
    args = list(node.expressions)
    is_named = [isinstance(a, exp.PropertyEQ) for a in args]
    if any(is_named[i] and not is_named[i + 1] for i in range(len(args) - 1)):
        return None  # a positional argument after a named one
    pos = [a for a, k in zip(args, is_named, strict=True) if not k]
    named = {a.this.name.lower(): a.expression for a, k in zip(args, is_named, strict=True) if k}
    if len(named) != sum(is_named):
        return None  # a name given twice
    want = 2 if fn == "dp_quantile" else 1
    # parameters given by position after the value (and p) take the macros' order of the named ones
    # (dpsql.surface.NAMED): ``dp_median(x, 0.5)`` is ``dp_median(x, epsilon := 0.5)``
    extra = pos[want:]
    if len(extra) > len(NAMED) or any(k in named for k in NAMED[: len(extra)]):
        return None
    named.update(zip(NAMED, extra, strict=False))
    # a NULL parameter is one not given (the macros' defaults are NULL), but epsilon must be a number
    named = {k: v for k, v in named.items() if k == "epsilon" or not isinstance(v, exp.Null)}
    pos = pos[:want]
    if len(pos) != want or set(named) - {"epsilon", "method"} or "epsilon" not in named:
        return None
    if fn in _VAR:
        return _var_call(pos[0], named, name, _VAR[fn])
    p = _literal_number(pos[1]) if fn == "dp_quantile" else 0.5
    if p is None or not 0.0 < p < 1.0:
        return None
    if "method" in named:
        m = named["method"]
        if not (isinstance(m, exp.Literal) and m.is_string and m.this in ("scalefree", "default")):
            return None
    eps = _literal_number(named["epsilon"])
    if eps is None:
        return None
    if fn in _MEAN_SUM:  # scalefree's mean / sum (dpsql.core.summary_mean)
        validate(_MEAN_SUM[fn], get_method(_MEAN_SUM[fn], None), Params(epsilon=eps))
        return Call(pos[0].sql("duckdb"), eps, name, 0.5, _MEAN_SUM[fn])
    if fn == "dp_iqr":  # Q1 and Q3 of one count, floor and centre (dpsql.core.summary.iqr)
        validate("iqr", get_method("iqr", None), Params(epsilon=eps))
        return Call(pos[0].sql("duckdb"), eps, name, core_summary.IQR_PS, "iqr")
    params = Params(epsilon=eps, p=p)
    validate("quantile", get_method("quantile", None), params)  # ParameterError names the argument
    return Call(pos[0].sql("duckdb"), eps, name, p)


def _var_call(value: exp.Expression, named: dict, name: str, aggregate: str) -> Call | None:
    """dp_var / dp_stddev with at most ``method := 'scalefree'`` (the default) or ``'asymmetric'`` besides
    epsilon."""
    m = named.get("method")
    if m is not None and not (isinstance(m, exp.Literal) and m.is_string and
                              m.this in ("asymmetric", "scalefree", "default")):
        return None
    method = "asymmetric" if m is not None and m.this == "asymmetric" else "scalefree"
    eps = _literal_number(named["epsilon"])
    if eps is None:
        return None
    validate("var", get_method("var", method), Params(epsilon=eps))  # ParameterError names the argument
    if not primitives.WIDE_OK:  # both methods' asymmetric class needs it: the macros refuse before reading a row
        return None
    return Call(value.sql("duckdb"), eps, name, 0.5, aggregate, method)


def compile_query(sql: str) -> Plan | None:
    """The summary plan of ``sql``, or None when this slice does not own it (module docstring)."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.ParseError:
        return None
    if not isinstance(tree, exp.Select) or any(v for k, v in tree.args.items() if k not in _ALLOWED_ARGS):
        return None
    if tree.args.get("kind") or not (tree.args.get("from") or tree.args.get("from_")):
        return None
    group = tree.args.get("group")
    if group is not None and set(group.args) - {"expressions"}:
        return None
    keys = [g.sql("duckdb") for g in (group.expressions if group is not None else [])]
    if any(isinstance(g, exp.Literal) for g in (group.expressions if group is not None else [])):
        return None  # GROUP BY 1: positional
    columns, calls = [], []
    for item in tree.expressions:
        inner = item.this if isinstance(item, exp.Alias) else item
        name = item.alias_or_name if isinstance(item, exp.Alias) else inner.sql("duckdb")
        c = _call(inner, name)
        if c is not None:
            columns.append(("dp", len(calls), name))
            calls.append(c)
            continue
        text = inner.sql("duckdb")
        if text not in keys:
            return None
        columns.append(("key", keys.index(text), item.alias_or_name if isinstance(item, exp.Alias) else
                        (inner.name if isinstance(inner, exp.Column) else text)))
    if not calls or any(inner.find(exp.AggFunc, exp.Window) for inner in tree.expressions
                        if not isinstance(inner.this if isinstance(inner, exp.Alias) else inner, exp.Anonymous)):
        return None
    body = tree.copy()
    body.set("expressions", [exp.Star()])
    body.set("group", None)
    source = body.sql("duckdb")[len("SELECT * "):]
    return Plan(source, tuple(keys), tuple(columns), tuple(calls), _draws(tree))


# --------------------------------------------------------------------------- SQL of the passes

_D = "pow(2.0, 1000)"
_VALID = "_x IS NOT NULL AND NOT isnan(_x)"
_VC = f"CASE WHEN _x > {_D} THEN {_D} WHEN _x < -{_D} THEN -{_D} ELSE _x END"


_TINY = "4.9406564584124654e-324"  # the smallest subnormal: log2's argument floor
_NEAR_INT = 1e-9  # log2 is within a few ulps (< 1e-12 on |log2| <= 1100): decide exactly only this close to an integer


def _floor_log2(a: str, l: str) -> str:
    """Exact floor(log2(a)) for a > 0 given ``l = log2(a)``: floor(l) away from integers, else one exact
    comparison with a power of two (DuckDB evaluates a CASE branch only on its rows)."""
    r = f"CAST(round({l}) AS BIGINT)"
    return (f"CASE WHEN {l} - floor({l}) BETWEEN {_NEAR_INT} AND {1 - _NEAR_INT} THEN CAST(floor({l}) AS BIGINT) "
            f"ELSE {r} - CASE WHEN {a} < pow(2.0, {r}) THEN 1 ELSE 0 END END")


def _ceil_log2(a: str, l: str) -> str:
    """Exact smallest k with a <= 2**k, a > 0, given ``l = log2(a)``."""
    r = f"CAST(round({l}) AS BIGINT)"
    return (f"CASE WHEN {l} - floor({l}) BETWEEN {_NEAR_INT} AND {1 - _NEAR_INT} THEN CAST(ceil({l}) AS BIGINT) "
            f"ELSE {r} + CASE WHEN {a} <= pow(2.0, {r} - 1) THEN -1 WHEN {a} <= pow(2.0, {r}) THEN 0 ELSE 1 END END")


def _bucket(shift: int | str) -> str:
    """The raw bucket ``sign * (mag >> shift)`` of a row with ``_neg`` and ``_mag`` (shift: a literal or a
    column)."""
    return f"CASE WHEN _neg THEN -(_mag >> {shift}) ELSE (_mag >> {shift}) END"


def _shift_sql(shift: np.ndarray, col: str, cols: dict[str, np.ndarray]) -> str:
    """A per-group shift as SQL: a literal when every group has the same one, else the column ``col`` (added
    to ``cols``, the per-group parameters)."""
    shift = np.asarray(shift, dtype=np.int64)
    if shift.size and np.all(shift == shift[0]):
        return str(int(shift[0]))
    cols[col] = shift
    return col


#: the smallest normal double, 2**-1022
_NORMAL = "2.2250738585072014e-308"
#: the first bucket key's tag for subnormal values and zeros (:func:`_exm_key`): above every normal key's magnitude
_SUB_TAG = 1 << 61
_FRACTION = (1 << 52) - 1
#: fl(sqrt 2) (a constant DuckDB folds; sqrt is correctly rounded)
_SQRT2 = "sqrt(2.0)"


def _exm_key(v: str, sh: str) -> str:
    """One BIGINT per row of a valid value ``v`` (no NULL, no NaN) from which :func:`_exm_decode` gets exactly
    :meth:`DuckSource._exm`'s sign, floor exponent and top ``52 - sh`` mantissa bits (``sh``: a literal or a
    column, 16 <= sh <= 52), read from the IEEE bits (``CAST(v AS BIT)`` is the double's 64 bits, most
    significant first, and as a BIGINT its two's-complement reading) instead of a log2, a pow and a division per
    row.  A normal v (|v| >= 2**-1022) gives its bits shifted right arithmetically by ``sh``: sign, biased
    exponent ``ex + 1023`` and the top bits of the fraction ``f`` (``|v| = 2**ex (1 + f)``, ``floor(f 2**bits)``
    is the fraction field's top ``bits`` bits).  A subnormal or zero v gives its whole fraction field M (``|v| =
    M 2**-1074``) tagged ``+-(2**61 + M)`` (the sign of v < 0, so -0.0 counts as 0, as in ``_exm``): the decoding
    needs every bit of M.  The hash aggregate over (group, key) then has exactly the keys of (group, sign,
    exponent, bits).  10**7 rows, one group: ~0.14 s for the histogram against ~0.27 s through ``_exm``."""
    bits = f"CAST(CAST({v} AS BIT) AS BIGINT)"
    return (f"CASE WHEN abs({v}) >= {_NORMAL} THEN {bits} >> {sh} WHEN {v} < 0 THEN -{_SUB_TAG} - ({bits} & "
            f"{_FRACTION}) ELSE {_SUB_TAG} + ({bits} & {_FRACTION}) END")


def _exm_decode(key: np.ndarray, bits: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_exm_key`'s keys (``bits = 52 - sh`` per key) as ``(neg, ex, m)``: ``_exm``'s ``_neg``, ``_ex``
    (:data:`dpsql.core.summary.ZERO_EXPONENT` for 0) and ``_m``.  Subnormal ``M 2**-1074``: ``ex = msb(M) - 1074``
    (frexp of M, exact below 2**53) and ``m = floor((M / 2**msb - 1) 2**bits)``, the same exact float steps as
    ``_exm``'s ``(|v| / 2**ex - 1) * 2**bits``."""
    key, bits = np.asarray(key, dtype=np.int64), np.asarray(bits, dtype=np.int64)
    neg = key < 0
    sub = np.abs(key) >= _SUB_TAG
    u = key & ((np.int64(1) << (11 + bits)) - 1)  # two's complement: the sign's copies above the fields drop
    ex = (u >> bits) - 1023
    m = u & ((np.int64(1) << bits) - 1)
    big = np.abs(key[sub]) - _SUB_TAG
    msb = np.frexp(big.astype(np.float64))[1].astype(np.int64) - 1
    ms = np.floor((np.ldexp(big.astype(np.float64), -msb) - 1.0) * np.ldexp(1.0, bits[sub])).astype(np.int64)
    ex[sub] = np.where(big == 0, core_summary.ZERO_EXPONENT, msb - 1074)
    m[sub] = np.where(big == 0, 0, ms)
    return neg, ex, m


def _literal(v: np.ndarray) -> str:
    """The first entry of a one-group parameter column as an exact SQL literal of the column's type: a DOUBLE
    from its shortest round-trip text (``CAST('<repr>' AS DOUBLE)``: DuckDB's string to double is correctly
    rounded, so the literal is the same 64 bits, -0.0, subnormals, inf and -inf included; a bare ``0.1`` would be
    a DECIMAL), a BIGINT or a BOOLEAN from its text; always ``CAST('<text>' AS <type>)`` (:data:`LITERAL`)."""
    x = np.asarray(v).reshape(-1)[0]
    if isinstance(x, np.bool_):
        return f"CAST('{'true' if x else 'false'}' AS BOOLEAN)"
    if isinstance(x, np.integer):
        return f"CAST('{int(x)}' AS BIGINT)"
    if isinstance(x, np.floating):
        return f"CAST('{float(x)!r}' AS DOUBLE)"
    raise TypeError(f"summary plans: no literal for a parameter of type {type(x).__name__}")


#: the text of every literal :func:`_inline` puts in a statement (tests blank them to compare statements)
LITERAL = re.compile(r"CAST\('[^']*' AS (?:DOUBLE|BIGINT|BOOLEAN)\)")
_PARAM_REF = re.compile(r"\bp\.(_\w+)\b")


def _inline(sql: str, lits: list[dict[str, str | None]]) -> str:
    """``sql`` with each reference ``p.<col>`` to a parameter of a one-group pass replaced by its literal
    (:func:`_literal`).  Why: with one group the parameters are a one-row table cross-joined to the rows, and a
    filter such as ``_v BETWEEN _vlo AND _vhi`` over columns of both sides runs as a nested loop join (10**7 rows:
    ~0.2 s of thread time in EXPLAIN ANALYZE); with literals it is a plain filter pushed to the scan.  The
    parameters are released values, so the statement's text depends on released values only, and each literal
    is the column's value bit for bit, so every pass counts exactly what it did; whether a statement has
    literals is a function of its group count (released counts).  ``lits``: per registered table of the
    statement its columns' literals (None: more than one group).  A column named by two tables with different
    literals, or without one in either, is left as a column (the tables keep every column)."""
    merged: dict[str, str | None] = {}
    for d in lits:
        for c, v in d.items():
            merged[c] = v if c not in merged or merged[c] == v else None
    return _PARAM_REF.sub(lambda m: merged.get(m.group(1)) or m.group(0), sql) if merged else sql


def _fetch(con: duckdb.DuckDBPyConnection, sql: str, params: dict | None = None) -> pa.Table:
    return (con.sql(sql) if params is None else con.sql(sql, params=params)).arrow().read_all()


def _np(t: pa.Table, col: str, dtype: type = np.int64) -> np.ndarray:
    return t.column(col).to_numpy(zero_copy_only=False).astype(dtype)


#: the hybrid route: a group whose released count is below this reads its rows in one pass (with every such group
#: of the query's calls on the same value) and runs the list route's code in Python; larger groups take the
#: summary passes (module docstring).  Measured (benchmarks/results/plans.md, --small-ab): rows are 1.8-2.6x
#: faster below it at similar memory; above it the passes are within ~1.5x of the rows' time at 1/2-1/4 of the
#: memory (the floor subsampled), and faster from ~10**6 rows per group
SMALL_ROWS = 2.0**16

#: the hybrid route's rows come back in pieces of about this many released rows (plus less than a group), one at a time
#: (:meth:`DuckSource.will_batch`); below it (every row group of the calls on one value together) one rows pass
#: serves every call on that value (:func:`run`).  Each piece is a full scan of the source (10**8 rows: ~48 passes
#: at 2**21).  Measured at 10**7 rows in 10**4 groups (fresh processes, peak RSS above the open file's, avg(x)
#: 97 MB): dp_median 383 / 274 / 216 MB at pieces of 2**22 / 2**21 / 2**20 (734 MB in one pass), dp_mean 374 / 338
#: / 316 MB (its list code's ~100 MB per core part of 2**19 rows stays), times within the machine's noise
ROWS_PASS_ROWS = 2.0**21

#: matching keys are streamed to DuckDB in batches of this many words
KEY_BATCH = 1 << 20


def matching_words(rng: Rng, n: int):  # noqa: ANN201 - a generator of uint64 arrays
    """``n`` i.i.d. uniform 64-bit words in batches of :data:`KEY_BATCH`, drawn lazily while DuckDB reads them:
    from the OS CSPRNG in production (each batch its own AES-CTR stream, :meth:`dpsql.noise.Rng.words`); under a
    seeded test generator from a child generator seeded by one word of ``rng``, so that ``rng`` moves by one
    word however much of the stream DuckDB reads."""
    src = rng if rng.is_secure else Rng.seeded(int(rng.words(1)[0]))
    for start in range(0, n, KEY_BATCH):
        yield src.words(min(KEY_BATCH, n - start))


class DuckSource:
    """:class:`dpsql.core.summary.Source` over one dp call of a plan: native DuckDB passes (module docstring)."""

    _ids = itertools.count()
    #: count the first bucket pass's rows in the gap pass's scan (:meth:`gap_histogram`; False: a pass of its own)
    FUSE_FIRST = True
    #: a one-group pass reads its per-group parameters as literals (:func:`_inline`)
    INLINE = True
    #: the value the bucket and tail passes read (the clamped ``_x``; a derived source's own, MeanDuckSource.derived)
    VALUE = _VC

    def __init__(self, con: duckdb.DuckDBPyConnection, plan: Plan, call: int, groups: pa.Table, n: np.ndarray,
                 rng: Rng, rows: np.ndarray | None = None) -> None:
        self.con, self.plan, self.groups, self.n, self.rng, self.call = con, plan, groups, n, rng, call
        keys = ", ".join(f"{k} AS _k{i}" for i, k in enumerate(plan.keys))
        value = plan.calls[call].value
        self.base = f"(SELECT {keys + ', ' if keys else ''}CAST({value} AS DOUBLE) AS _x {plan.source})"
        self.passes = 0
        if rows is None:  # (tests) one more pass: count them
            everyone = np.arange(len(n), dtype=np.int64)
            self._registered = []
            t = self._run(f"SELECT p._g AS _g, count(*) AS c FROM {self._params(everyone, {})} GROUP BY ALL")
            rows = np.zeros(len(n), dtype=np.int64)
            rows[_np(t, "_g")] = _np(t, "c")
        #: rows per group (NULL and NaN included): how many matching keys a pass over some groups draws
        self.rows = np.asarray(rows, dtype=np.int64)
        self.passes = 0

    def sizes(self) -> np.ndarray:
        return self.n

    def _params(self, groups: np.ndarray, cols: dict[str, np.ndarray], base: str | None = None) -> str:
        """Register a per-group parameter table for ``groups`` (their keys, ``_g`` = index into groups, cols)
        and return the FROM text joining it to the rows (``base``, default ``self.base``)."""
        base = self.base if base is None else base
        t = self.groups.take(pa.array(groups)) if self.plan.keys else pa.table({})
        t = t.append_column("_g", pa.array(np.arange(groups.size, dtype=np.int64))) if self.plan.keys else \
            pa.table({"_g": pa.array(np.zeros(1, dtype=np.int64))})
        for name, v in cols.items():
            t = t.append_column(name, pa.array(v))
        name = f"_dpsql_plan_par{next(self._ids)}"
        self.con.register(name, t)
        self._registered.append(name)
        lits = getattr(self, "_lits", {})
        one = self.INLINE and groups.size == 1  # one row: inline its parameters (a function of the group count)
        lits[name] = {c: _literal(v) if one else None for c, v in cols.items()}
        self._lits = lits
        if not self.plan.keys:
            return f"{base} b CROSS JOIN {name} p"
        on = " AND ".join(f"b._k{i} IS NOT DISTINCT FROM p._k{i}" for i in range(len(self.plan.keys)))
        return f"{base} b JOIN {name} p ON {on}"

    def _run(self, sql: str, params: dict | None = None) -> pa.Table:
        self._registered: list[str] = getattr(self, "_registered", [])
        self.passes += 1
        try:
            return _fetch(self.con, _inline(sql, [getattr(self, "_lits", {}).get(n, {}) for n in self._registered]),
                          params)
        finally:
            for name in self._registered:
                self.con.unregister(name)
                getattr(self, "_lits", {}).pop(name, None)
            self._registered = []

    def _keyed(self, groups: np.ndarray, rng: Rng, cols: dict[str, np.ndarray] | None = None) -> str:
        """The rows of ``groups`` (``_g``, ``_x`` and the per-group ``cols``) with a key each: as many fresh
        words (:func:`matching_words`) as the groups have rows, joined by position (``POSITIONAL JOIN``: row i of
        the join's output, in whatever order DuckDB produces it, gets word i)."""
        cols = cols or {}
        src = self._params(groups, cols)
        extra = "".join(f", p.{c} AS {c}" for c in cols)
        return self._keyed_rows(f"SELECT p._g AS _g, b._x AS _x{extra} FROM {src}", int(self.rows[groups].sum()),
                                rng)

    def _keyed_rows(self, rows: str, n: int, rng: Rng) -> str:
        """``rows`` (a SELECT of ``n`` rows) with a fresh word ``_key`` each, joined by position."""
        name = f"_dpsql_plan_keys{next(self._ids)}"
        schema = pa.schema([("_key", pa.uint64())])
        words = matching_words(rng, n)
        self.con.register(name, pa.RecordBatchReader.from_batches(
            schema, (pa.record_batch([pa.array(w)], schema=schema) for w in words)))
        self._registered.append(name)
        return f"({rows}) POSITIONAL JOIN {name}"

    @staticmethod
    def _pairs_sql(rows: str, partition: bool, more: str = "") -> str:
        """The window over ``rows`` (``_g``, ``v``, ``_key``): each group ordered by its keys, ``_gap`` to the
        previous row, the position, tie and missing-key flags, and ``more`` columns carried.  One group: no
        PARTITION BY (DuckDB sorts one partition on one thread: 1e7 rows, 3.7 s and 1.1 GB with it, 1.9 s and
        0.7 GB without); the order, hence the matching, is the same."""
        over = "PARTITION BY _g " if partition else ""
        return (f"SELECT _g, abs(v - lag(v) OVER w) AS _gap, row_number() OVER w AS _pos, "
                f"_key = lag(_key) OVER w AS _tie, _key IS NULL AS _nokey{more} "
                f"FROM ({rows}) WINDOW w AS ({over}ORDER BY _key)")

    @staticmethod
    def _gap_k() -> str:
        """The clipped gap exponent of a row of :meth:`_pairs_sql` with ``_lg = log2(_gap)``."""
        return (f"CASE WHEN _gap = 0 THEN {core_summary.GAP_ZERO} ELSE greatest(least({_ceil_log2('_gap', '_lg')}, "
                f"{core_summary.GAP_HI}), {core_summary.GAP_LO}) END")

    def _gap_sql(self, rows: str, partition: bool) -> str:
        """The gap histogram (``_g``, ``k``, ``c``) of the matching over ``rows``, with the ties and missing keys
        counted (``ties``, ``nokey``)."""
        return (f"SELECT _g, {self._gap_k()} AS k, count(*) FILTER (WHERE _pos % 2 = 0) AS c, count_if(_tie) AS ties, "
                f"count_if(_nokey) AS nokey FROM (SELECT _g, _gap, _pos, _tie, _nokey, "
                f"log2(greatest(_gap, {_TINY})) AS _lg FROM ({self._pairs_sql(rows, partition)}) "
                f"WHERE _pos % 2 = 0 OR _tie OR _nokey) GROUP BY ALL ORDER BY _g, k")

    def gap_histogram(self, groups: np.ndarray, rng: Rng, first: np.ndarray | None = None, rate: float = 1.0
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each group's rows in the order of their keys (module docstring), consecutive rows paired.  A group
        with two equal keys (probability below ``n**2 2**-65``, whatever the values) voids the pass, which
        reruns with new keys (rejection: the accepted order is uniform, see the docstring).

        With ``first`` (the first bucket pass's shift per group) the same scan also counts the rows by sign,
        floor exponent and top ``RAW_BITS - first`` mantissa bits (``GROUPING SETS``: the window's rows, no
        second scan of the source; one key per row from its IEEE bits, :func:`_exm_key`); :meth:`bucket_histogram`
        maps them to that pass's buckets once the floor is released (:func:`dpsql.core.summary.first_buckets`),
        without a pass of its own.

        ``rate`` < 1 (a power of two): the matching of a Poisson subsample, :meth:`_gap_subsampled`."""
        fuse = first is not None and self.FUSE_FIRST
        if rate < 1.0:
            return self._gap_subsampled(groups, rng, first if fuse else None, rate)
        while True:
            self._registered = []
            cols: dict[str, np.ndarray] = {}
            sh = self._first_shift(first, cols) if fuse else ""
            carry = "".join(f", {c}" for c in cols)
            rows = f"SELECT _g, {_VC} AS v, _key{carry} FROM {self._keyed(groups, rng, cols)} WHERE {_VALID}"
            if not fuse:
                sql = self._gap_sql(rows, groups.size > 1)
            else:
                pairs = self._pairs_sql(rows, groups.size > 1, ", v" + carry)
                sql = (f"SELECT _g, _k AS k, _ek, grouping(_ek) AS _gap_set, "
                       f"count(*) FILTER (WHERE _pos % 2 = 0) AS c, count(*) AS n, count(*) FILTER (WHERE _tie) AS "
                       f"ties, count(*) FILTER (WHERE _nokey) AS nokey FROM (SELECT *, CASE WHEN _pos % 2 = 0 THEN "
                       f"{self._gap_k()} END AS _k, {_exm_key('v', sh)} AS _ek FROM (SELECT *, log2(greatest(_gap, "
                       f"{_TINY})) AS _lg FROM ({pairs}))) GROUP BY GROUPING SETS ((_g, _k), (_g, _ek))")
            t = self._run(sql)
            if _np(t, "nokey").any():  # the source had more rows than counted: never a matching without keys
                raise RuntimeError("summary plans: the source's row count changed between passes")
            if _np(t, "ties").any():
                continue
            if not fuse:
                c = _np(t, "c")
                keep = c > 0
                return _np(t, "_g")[keep], _np(t, "k")[keep], c[keep]
            gap_set = _np(t, "_gap_set").astype(bool)
            gp = t.filter(pa.array(gap_set & (_np(t, "c") > 0)))  # the pairs' rows (odd positions: k NULL, c 0)
            bk = t.filter(pa.array(~gap_set))
            hg, hk, hc = _np(gp, "_g"), _np(gp, "k"), _np(gp, "c")
            order = np.lexsort((hk, hg))
            self._keep_first(groups, first, _np(bk, "_g"), _np(bk, "_ek"), _np(bk, "n"))
            return hg[order], hk[order], hc[order]

    def _keep_first(self, groups: np.ndarray, first: np.ndarray, g: np.ndarray, key: np.ndarray, n: np.ndarray
                    ) -> None:
        """Keep a gap pass's counts per (local group ``g``, :func:`_exm_key`) as (sign, floor exponent, mantissa
        bits) counts for the first bucket pass of its groups (one part per gap pass: a class's rate classes each
        bring theirs)."""
        first = np.asarray(first, dtype=np.int64).copy()
        neg, ex, m = _exm_decode(key, core_summary.RAW_BITS - first[g])
        parts = getattr(self, "_first_parts", [])
        parts.append((np.array(groups, copy=True), first, g, neg, ex, m, n))
        self._first_parts = parts

    def _take_first(self, groups: np.ndarray, shift: np.ndarray) -> tuple | None:
        """The kept counts as one part over ``groups`` (local group indices), if the gap passes since the last
        bucket pass covered exactly these groups at these shifts; else None (the first pass runs on its own)."""
        parts, self._first_parts = getattr(self, "_first_parts", []), []
        if not parts:
            return None
        every = np.concatenate([p[0] for p in parts])
        order = np.argsort(every, kind="stable")
        if not np.array_equal(every[order], groups) or not np.array_equal(np.concatenate([p[1] for p in parts])[order],
                                                                         shift):
            return None
        g = np.concatenate([np.searchsorted(groups, p[0][p[2]]) for p in parts])
        return (g, *(np.concatenate([p[i] for p in parts]) for i in range(3, 7)))

    @staticmethod
    def _first_scale(first: np.ndarray, cols: dict[str, np.ndarray]) -> str:
        """``2**(RAW_BITS - first)`` per group as SQL: a literal when every group has the same, else a column."""
        scale = np.ldexp(1.0, core_summary.RAW_BITS - np.asarray(first, dtype=np.int64))
        if scale.size and np.all(scale == scale[0]):
            return repr(float(scale[0]))
        cols["_pb"] = scale
        return "_pb"

    @staticmethod
    def _first_shift(first: np.ndarray, cols: dict[str, np.ndarray]) -> str:
        """:func:`_exm_key`'s shift ``52 - (RAW_BITS - first)`` per group as SQL: a literal when every group has
        the same, else the column ``_es`` (added to ``cols``)."""
        sh = 52 - (core_summary.RAW_BITS - np.asarray(first, dtype=np.int64))
        if np.any(sh < 16) or np.any(sh > 52):
            raise ValueError("summary plans: the first bucket pass's shift must be in [0, RAW_BITS]")
        return _shift_sql(sh, "_es", cols)

    @staticmethod
    def _exm(rows: str, pb: str) -> str:
        """``rows`` (with ``v``) plus sign ``_neg``, floor exponent ``_ex``, ``_pw = 2**_ex`` and top mantissa bits
        ``_m`` at scale ``pb`` (:func:`dpsql.core.summary.first_buckets`' inputs: no floor needed)."""
        inner = f"SELECT *, v < 0 AS _neg, abs(v) AS _a, log2(greatest(abs(v), {_TINY})) AS _l FROM ({rows})"
        ex = (f"SELECT *, CASE WHEN _a = 0 THEN {core_summary.ZERO_EXPONENT} ELSE {_floor_log2('_a', '_l')} "
              f"END AS _ex FROM ({inner})")
        return (f"SELECT *, CASE WHEN _a = 0 THEN 0 ELSE CAST(floor((_a / _pw - 1.0) * {pb}) AS BIGINT) END AS _m "
                f"FROM (SELECT *, pow(2.0, _ex) AS _pw FROM ({ex}))")

    def _gap_subsampled(self, groups: np.ndarray, rng: Rng, first: np.ndarray | None, rate: float
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The gap histogram over a uniformly random maximal matching of a Poisson(``rate``) subsample of each
        group's valid rows (module docstring, "Subsampled floor"), in two passes:

        1. the coins: every row of ``groups`` gets a fresh word (:meth:`_keyed`) and is kept iff it is below
           ``2**64 rate`` (``rate = 2**-k``: probability exactly ``rate``, independently per row, never looking
           at the values); the kept rows come back to Python (about ``rate n`` of them).  With ``first`` the
           same statement counts every valid row by sign, floor exponent and mantissa bits (the first bucket
           histogram, as the fused rate-1 pass; a second scan of the source, no keys).
        2. the matching: the kept rows (an Arrow table) get fresh words each, are ordered by them per group and
           paired; a tie voids this pass only (new order words, the same kept rows), so the subsample's law is
           never conditioned on anything."""
        k = -math.frexp(rate)[1] + 1
        if rate != math.ldexp(1.0, -k) or not 1 <= k <= 63:
            raise ValueError("summary plans: the floor's rate must be a power of two in [2**-63, 1/2]")
        self._registered = []
        cols: dict[str, np.ndarray] = {}
        sh = self._first_shift(first, cols) if first is not None else ""
        kept = (f"SELECT 0 AS _tag, _g, {_VC} AS v, _key IS NULL AS _nokey FROM {self._keyed(groups, rng)} "
                f"WHERE _key IS NULL OR (_key < {1 << (64 - k)} AND {_VALID})")
        if first is None:
            sql = kept
        else:
            rows = f"SELECT p._g AS _g, {_VC} AS v{''.join(f', p.{c} AS {c}' for c in cols)} " \
                   f"FROM {self._params(groups, cols)} WHERE {_VALID}"
            hist = (f"SELECT 1 AS _tag, _g, NULL::DOUBLE AS v, false AS _nokey, _ek, count(*) AS n "
                    f"FROM (SELECT _g, {_exm_key('v', sh)} AS _ek FROM ({rows})) GROUP BY _g, _ek")
            sql = f"SELECT _tag, _g, v, _nokey, NULL::BIGINT AS _ek, NULL::BIGINT AS n FROM ({kept}) UNION ALL {hist}"
        t = self._run(sql)
        if _np(t, "_nokey", bool).any():
            raise RuntimeError("summary plans: the source's row count changed between passes")
        tag = _np(t, "_tag")
        if first is not None:
            bk = t.filter(pa.array(tag == 1))
            self._keep_first(groups, first, _np(bk, "_g"), _np(bk, "_ek"), _np(bk, "n"))
        sub = t.filter(pa.array(tag == 0)).select(["_g", "v"])
        while True:
            self._registered = []
            name = f"_dpsql_plan_kept{next(self._ids)}"
            self.con.register(name, sub)
            self._registered.append(name)
            keyed = self._keyed_rows(f"SELECT _g, v FROM {name}", sub.num_rows, rng)
            got = self._run(self._gap_sql(f"SELECT _g, v, _key FROM {keyed}", groups.size > 1))
            if _np(got, "nokey").any():
                raise RuntimeError("summary plans: the source's row count changed between passes")
            if _np(got, "ties").any():
                continue
            c = _np(got, "c")
            keep = c > 0
            return _np(got, "_g")[keep], _np(got, "k")[keep], c[keep]

    def _rows(self, groups: np.ndarray, e: np.ndarray, cols: dict[str, np.ndarray], where: str = "",
              pre: str = "") -> str:
        """The valid rows of ``groups``: group ``_g``, floor exponent ``_e``, ``_pe = 2**e`` and the split
        ``_s1 _s2 = 2**(RAW_BITS - e)`` (per-group constants: no pow per row), clamped value ``_v``, ``_neg``,
        ``_a = |x|`` and its ``_l = log2``, and ``cols``; ``where`` filters on them, ``pre`` (a condition on the
        source's row alone) before the join with the parameters."""
        e = e.astype(np.int64)
        h = (core_summary.RAW_BITS - e) // 2
        src = self._params(groups, {"_e": e, "_pe": np.ldexp(1.0, e), "_s1": np.ldexp(1.0, h),
                                    "_s2": np.ldexp(1.0, core_summary.RAW_BITS - e - h), **cols})
        extra = "".join(f", p.{c} AS {c}" for c in ("_e", "_pe", "_s1", "_s2", *cols))
        rows = f"SELECT p._g AS _g{extra}, {self.VALUE} AS _v FROM {src} WHERE {_VALID}{pre and ' AND ' + pre}"
        return (f"SELECT *, _v < 0 AS _neg, abs(_v) AS _a, log2(greatest(abs(_v), 4.9406564584124654e-324)) AS _l "
                f"FROM ({rows}) {where}")

    def _octave(self) -> str:
        """The octave ``k = ex1 + 1 - e`` above the floor (meaningful where ``_a >= _pe``)."""
        return f"({_floor_log2('_a', '_l')} + 1 - _e)"

    def _mag(self) -> str:
        """core.summary.raw_codes' magnitude (exact float steps; one pow per row above the floor)."""
        ex1 = "(_k + _e - 1)"
        octave = (f"(_k << {core_summary.RAW_BITS}) + CAST(floor((_a / pow(2.0, {ex1}) - 1.0) * "
                  f"{float(2 ** core_summary.RAW_BITS)!r}) AS BIGINT)")
        return f"CASE WHEN _a < _pe THEN CAST(floor(_a * _s1 * _s2) AS BIGINT) ELSE {octave} END"

    def bucket_histogram(self, groups, e, shift, prev, lo, hi):  # noqa: ANN001, ANN201, D102
        self._registered = []
        shift = np.broadcast_to(np.asarray(shift, dtype=np.int64), (groups.size,))
        f = self._take_first(groups, shift) if prev is None else None
        if f is not None:
            return self._first_from_gap_pass(e, shift, *f)  # counted in the gap passes' scans: no pass of its own
        if prev is None and np.all(shift == core_summary.RAW_BITS):  # the octave pass: no mantissa needed
            rows = self._rows(groups, e, {})
            b = f"CASE WHEN _a < _pe THEN 0 WHEN _neg THEN -{self._octave()} ELSE {self._octave()} END"
            sql = f"SELECT _g, {b} AS b, count(*) AS c FROM ({rows}) GROUP BY ALL ORDER BY _g, b"
        elif prev is None:  # a first pass below the octave: every row's bucket
            cols = {}
            sh = _shift_sql(shift, "_sh", cols)
            rows = self._rows(groups, e, cols)
            mag = f"SELECT *, {self._mag()} AS _mag FROM (SELECT *, {self._octave()} AS _k FROM ({rows}))"
            sql = f"SELECT _g, {_bucket(sh)} AS b, count(*) AS c FROM ({mag}) GROUP BY ALL ORDER BY _g, b"
        else:  # first a cheap value filter (a superset of the buckets' rows), then the exact bucket filter
            prev = np.broadcast_to(np.asarray(prev, dtype=np.int64), (groups.size,))
            vlo, vhi = _value_range(lo, hi, prev, e)
            cols = {"_lo": lo, "_hi": hi, "_vlo": vlo, "_vhi": vhi}
            sh, pv = _shift_sql(shift, "_sh", cols), _shift_sql(prev, "_pv", cols)
            # several groups: first the union of their value ranges, as literals on the source's rows (pushed
            # below the join with the parameters; released values, a superset of each group's range)
            pre = "" if groups.size == 1 or "p." in self.VALUE else (
                f"{self.VALUE} BETWEEN {_literal(np.min(vlo, keepdims=True))} "
                f"AND {_literal(np.max(vhi, keepdims=True))}")
            rows = self._rows(groups, e, cols, "WHERE _v BETWEEN _vlo AND _vhi", pre)
            mag = f"SELECT *, {self._mag()} AS _mag FROM (SELECT *, {self._octave()} AS _k FROM ({rows}))"
            sql = (f"SELECT _g, {_bucket(sh)} AS b, count(*) AS c FROM ({mag}) WHERE {_bucket(pv)} "
                   f"BETWEEN _lo AND _hi GROUP BY ALL ORDER BY _g, b")
        t = self._run(sql)
        return _np(t, "_g"), _np(t, "b"), _np(t, "c")

    def _first_from_gap_pass(self, e: np.ndarray, first: np.ndarray, g: np.ndarray, neg: np.ndarray, ex: np.ndarray,
                             m: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The first bucket pass's histogram from the gap passes' (sign, floor exponent, mantissa bits) counts,
        once the floor ``e`` is known (exact, :func:`dpsql.core.summary.first_buckets`)."""
        b = core_summary.first_buckets(neg, ex, m, e[g], core_summary.RAW_BITS - first[g])
        if not g.size:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        order = np.lexsort((b, g))
        g, b, n = g[order], b[order], n[order]
        start = np.flatnonzero(np.concatenate([[True], (g[1:] != g[:-1]) | (b[1:] != b[:-1])]))
        return g[start], b[start], np.add.reduceat(n, start).astype(np.int64)

    def batch(self, groups: np.ndarray) -> Batch:
        """The valid rows of ``groups``, cleaned and sorted as the list route's input: from the rows fetched by
        :meth:`fetch_rows` when they hold ``groups``, else from the rows pass of the announced piece holding
        them (:meth:`will_batch`: the previous piece's rows are dropped first; :class:`_Piece` sorts them part
        by part), else one pass of their own."""
        have = getattr(self, "_fetched", None)
        if have is not None and groups.size and np.isin(groups, have[0]).all():
            return take_groups(have[1], np.searchsorted(have[0], groups))
        plan = getattr(self, "_pieces", None)
        if plan is not None and groups.size:
            pieces, of, parts = plan
            k = int(of[groups[0]])
            if k >= 0 and np.all(of[groups] == k):
                chunk = getattr(self, "_chunk", None)
                if chunk is None or chunk.index != k:
                    if chunk is not None:
                        chunk.close()
                    self._chunk = None  # free the previous piece's rows before the next pass
                    chunk = self._chunk = _Piece(k, pieces[k], self._batch(pieces[k]), parts[k])
                return chunk.take(groups)
        return _sort_groups(self._batch(groups))

    def will_batch(self, parts: list[np.ndarray], rows: list[float]) -> None:
        """The core announces the parts it will ask :meth:`batch` for, in order, with their released rows
        (:func:`dpsql.core.summary.announce_rows`).  Unless :meth:`fetch_rows` holds them all, they are cut into
        pieces of consecutive parts: piece k holds the parts whose running total of released rows (at the
        part's end) lies in ``[k R, (k + 1) R)`` with R = :data:`ROWS_PASS_ROWS` (a part above R alone), so a
        piece holds at most R plus its first part's rows; the core's parts are cut where a class's running total
        crosses a multiple of ``core.summary.ROWS_CHUNK`` (which divides R: one class's parts fill a piece to R
        plus less than one group's released rows) and the core announces every class's parts at once, once per
        call (:func:`dpsql.core.summary.announce_classes`; before, one announcement per route class cost each
        class a pass of its own, even a class of two groups), so the passes number about ``total / R + 1``.
        (Before: greedy pieces of at most R, which took three parts of ~R/4 whenever four exceeded R by a hair:
        ~17 % more passes, each a scan of the source; 3e7 rows in 3e4 groups, dp_median: 4.62 -> 4.54 s.)  Each
        piece is fetched by one rows pass when its first part is asked for, and its rows are dropped when the
        next piece is fetched, so at most one piece's rows are held.  The pieces, hence the passes' number and
        statements, are functions of the released counts (and of the core's public constants) only."""
        have = getattr(self, "_fetched", None)
        every = np.concatenate(parts)
        if have is not None and np.isin(every, have[0]).all():
            return
        self.drop_rows()
        of = np.full(self.n.size, -1, dtype=np.int64)
        pieces, held, cur, first, end, alone = [], [], [], 0.0, 0.0, False
        for g, r in zip(parts, rows, strict=True):
            end += r
            if cur and (end // ROWS_PASS_ROWS > first // ROWS_PASS_ROWS or alone or r > ROWS_PASS_ROWS):
                pieces.append(np.sort(np.concatenate(cur)))
                held.append(cur)
                cur = []
            if not cur:
                first = end
            cur.append(g)
            alone = r > ROWS_PASS_ROWS
        pieces.append(np.sort(np.concatenate(cur)))
        held.append(cur)
        for k, piece in enumerate(pieces):
            of[piece] = k
        self._pieces = (pieces, of, held)

    def drop_rows(self) -> None:
        """Forget the announced pieces and their rows (the end of a call; :meth:`fetch_rows`' rows, which
        other calls on the value share, stay until :func:`run` returns)."""
        chunk = getattr(self, "_chunk", None)
        if chunk is not None:
            chunk.close()
        self._chunk = self._pieces = None

    def fetch_rows(self, groups: np.ndarray) -> Batch:
        """One pass: the rows of ``groups`` (ascending), kept for :meth:`batch` (the hybrid route: every
        group any call of the query reads as rows, fetched once)."""
        b = _sort_groups(self._batch(groups))
        self._fetched = (np.asarray(groups, dtype=np.int64), b)
        return b

    def share_rows(self, other: DuckSource) -> None:
        """Serve :meth:`batch` from ``other``'s fetched rows (a call on the same value expression)."""
        self._fetched = getattr(other, "_fetched", None)

    def _batch(self, groups: np.ndarray) -> Batch:
        """One pass: the valid rows of ``groups`` (``_g``, ``_x AS _rows_x``) as DuckDB streams them, grouped in
        numpy (a radix argsort on the group index) and cleaned, NOT yet sorted within groups (a Batch owning its
        values: :func:`_sort_groups` or :class:`_Piece` sort them in place).  ``_g`` comes back as the narrowest
        unsigned type that holds the local group indices (USMALLINT up to 2**16 groups: a function of the group
        count), which numpy's radix argsort takes as it is.  Against a ``list(_x)`` hash aggregate (the list
        route's shape): at 10**7 rows in 10**4 groups 1.2-1.4 s against 1.3-2.2 s and ~150 MB less peak RSS
        (DuckDB holds no lists; numpy holds ~4 arrays of 8 bytes per row at the peak).  The rows' order within a
        group is the join's, never seen: each group is sorted.  Time and memory follow the sizes."""
        self._registered = []
        src = self._params(groups, {})
        G = groups.size
        t = self._run(f"SELECT CAST(p._g AS {'USMALLINT' if G <= 1 << 16 else 'UINTEGER'}) AS _g, _x AS _rows_x "
                      f"FROM {src} WHERE {_VALID}")
        g = t.column("_g").to_numpy(zero_copy_only=False)
        x = t.column("_rows_x").to_numpy(zero_copy_only=False)
        del t
        offsets = np.zeros(G + 1, dtype=np.int64)
        np.cumsum(np.bincount(g, minlength=G), out=offsets[1:])
        order = _group_order(g, G)
        del g
        x = x[order]
        del order
        b = clean(x, offsets)  # a new array (the clamp): the batch owns its values
        return b if b.values.flags.owndata else Batch(b.values.copy(), b.offsets)

    def rank_counts(self, groups, e, which, thr):  # noqa: ANN001, ANN201, D102
        """As value comparisons: ``raw <= thr`` is ``x < lower end of cell thr + 1`` (thr >= 0) or ``x <= -(lower
        end of cell -thr)`` (thr < 0)."""
        self._registered = []
        G = groups.size
        slot = np.zeros(which.size, dtype=np.int64)
        seen = np.zeros(G, dtype=np.int64)
        for i, w in enumerate(which):  # a few points at most (tail proposals)
            slot[i] = seen[w]
            seen[w] += 1
        Q = max(1, int(seen.max(initial=0)))  # always at least one (a dummy): the pass runs whatever the draws
        ee = e[which]
        with np.errstate(over="ignore"):
            v = np.where(thr >= 0, core_summary.raw_value(thr + 1, ee), -core_summary.raw_value(-thr, ee))
        cols = {}
        for q in range(Q):
            at = slot == q
            vq, sq = np.zeros(G), np.ones(G, dtype=bool)
            vq[which[at]], sq[which[at]] = v[at], thr[at] >= 0
            cols[f"_v{q}"], cols[f"_s{q}"] = vq, sq
        src = self._params(groups, cols)
        extra = "".join(f", p._v{q} AS _v{q}, p._s{q} AS _s{q}" for q in range(Q))
        counts = ", ".join(f"count_if(CASE WHEN _s{q} THEN _v < _v{q} ELSE _v <= _v{q} END) AS c{q}" for q in range(Q))
        t = self._run(f"SELECT _g, {counts} FROM (SELECT p._g AS _g{extra}, {self.VALUE} AS _v FROM {src} "
                      f"WHERE {_VALID}) GROUP BY _g")
        table = np.zeros((G, Q), dtype=np.int64)
        g = _np(t, "_g")
        for q in range(Q):
            table[g, q] = _np(t, f"c{q}")
        return table[which, slot]


# --------------------------------------------------------------------------- dp_mean and dp_sum: their passes

#: ladder indices tested per row: ``k_a .. k_a + WIDTH - 1`` with ``k_a = max(2, k0' - 3)`` (the argument needs
#: ``k0' - 3 .. k0' + 1``)
WIDTH = 5


def _x_at(t: int) -> str:
    """The ladder radius ``x_k`` at ``k = k_a + t`` as SQL.  With ``j_a, _par = divmod(k_a - 2, 2)``, ``P = 2**(e0 +
    j_a)`` and ``R = P * sqrt(2.0)``, the radii from k_a on are P, R, 2P, 2R, 4P, ... (``_par = 0``) or R, 2P, 2R,
    4P, 4R, ... (``_par = 1``): ``_ra`` (P or R) times ``2**(t/2)`` for even t, ``_rb`` (R or 2P) times ``2**((t-1)/2)``
    for odd t.  Scalings by literal powers of two >= 1: exact, and inf exactly where ldexp's ``2**(e0 + j)`` or its
    product with sqrt 2 overflows, as :func:`dpsql.core.ranges._step` (the intermediates never exceed the result)."""
    return f"({'_ra' if t % 2 == 0 else '_rb'} * {float(2 ** (t // 2))!r})"


def _inside(t: int) -> str:
    return f"(_v >= _c - {_x_at(t)} AND _v <= _c + {_x_at(t)})"


class MeanDuckSource(DuckSource):
    """:class:`DuckSource` with the passes of dp_mean and dp_sum (issue 17): the native DuckDB passes behind
    :class:`dpsql.core.summary_mean.MeanSource` (the core module has the design and the privacy argument).

    Besides the median's passes (:class:`dpsql.plans.DuckSource`: count, gap histograms, bucket and tail passes):

    * :meth:`MeanDuckSource.radius_histogram`, one pass: per row the first index k of the radius ladder (``x_1 = 0``,
      ``x_k = s0 2**((k-2)/2)``, s0 = ``2**e0`` per group) with ``c - x_k <= v <= c + x_k``, as IEEE doubles exactly as
      :func:`dpsql.core.ranges.radius` compares (``pow(2.0, e0 + j)`` is the exact power of two ``ldexp`` gives,
      ``* sqrt(2.0)`` the same single rounding, ``c - x`` and ``c + x`` the same subtractions; inf where numpy's
      overflow).  Exact search without a loop: for ``v != c`` let ``d = v - c`` (real).  ``x >= |d|`` puts v inside;
      ``x < |d| / 2`` leaves it outside (then ``c + x`` lies below the midpoint of c and v, which is at least half a
      spacing of v below v, so it cannot round to v; the same below c).  Consecutive ladder steps of the same parity
      differ by exactly 2, so the first inside index is one of ``k0 - 2, k0 - 1, k0`` with ``k0`` the first index at
      which ``x_k >= |d|``, i.e. ``k0 = ceil(2 (log2 |d| - e0)) + 2``.  The pass estimates it from the exact floor
      exponent ``ex`` of ``a = fl(|v - c|)`` and ``2**ex`` (:meth:`DuckSource._exm`, the same per-row values the cap's
      first bucket counts): ``k0' = 2 (ex - e0) + h + 3`` with ``h = [a >= fl(2**ex sqrt 2)]``.  Off by at most one:
      ``ceil(2 (log2 a - e0))`` is ``2 (ex - e0) + 1 + [log2 a > ex + 1/2]``, except ``2 (ex - e0)`` when a is a power
      of two; h errs only within an ulp of ``2**(ex + 1/2)``; and a's relative error 2**-53 moves ``2 log2`` by < 1e-15,
      which changes the ceil only where a lies that close to ``2**ex`` or ``2**(ex + 1/2)`` (a power of two just above
      the real |d|: ``k0' = k0 + 1``; near the sqrt 2 point the two errors are at the same integer, each moving k0' by
      one towards it).  Then ``P = 2**(e0 + (k_a - 2) // 2)`` is ``2**(ex - 1) = 2**ex / 2`` clamped to the
      window's clamps' ``[2**e0, 2**(e0 + (Q - 5) // 2)]`` (no second pow per row).  ``ex`` and ``2**ex`` come from
      the IEEE bits of a (``CAST(a AS BIT)``: exponent field, and a divided by its exact significand; zero and
      subnormal a through ``_exm``'s log2 and pow), the cap's first key as :func:`_exm_key`'s.  The pass tests
      the predicate exactly on the WIDTH = 5 indices ``k0' - 3 .. k0' + 1``: the first true one is the row's
      index.  A row whose window does not bracket the change (never, by the argument; counted as a bug guard)
      fails the pass.  (Before: ``k0' = ceil(2 (log2 a - e0)) + 2`` from log2 and a pow
      for P: 10**7 rows, 0.61 s for the fused pass below, then 0.54 s; log2, the exact-floor CASE, pow(2, ex) and
      the CASEs for P, _ra and _rb instead of the bits and the clamp: 1.09 s of CPU against 0.83 s, one process
      alternately on a loaded machine.)
      One side of the range decides: for v > c, ``v >= fl(c - x)`` always holds (x >= 0 gives ``c - x <= c``, and
      rounding is monotone, so ``fl(c - x) <= c < v``; x = inf gives -inf), so inside is ``v <= fl(c + x)``; for
      v < c likewise inside is ``v >= fl(c - x)``, i.e. ``-v <= fl(-c + x)`` (round to nearest even is odd:
      ``fl(-r) = -fl(r)``).  So per row ``w, cs = (v, c)`` or ``(-v, -c)`` and inside is ``w <= cs + x``, one
      comparison; with the predicate monotone in k the first index inside is ``k_a`` plus the number of window
      indices outside (a sum of flags, no CASE chain), whenever the guard holds (the same integers as the
      two-sided CASE, tests/plans/test_plans_mean.py).  Given the cap's first shift (``first``), the same scan
      also counts the derived ``|v - c|`` by :func:`_exm_key` (floor exponent and top mantissa bits, as the gap
      pass does for x), so :meth:`derived` of the same groups and c answers its first bucket pass without a
      scan (one hash aggregate over (group, k, key), decoded and summed to both histograms in numpy: k and the
      exponent move together, a few thousand keys).  10**7 lognormal rows, one group: 0.62 s for the
      fused pass against 0.48 s (radius) + 0.29 s (the cap's first bucket pass) before.
    * :meth:`MeanDuckSource.clipped_sums`, one pass: ``CAST(clip(clip(v, l, h) [- c], -S, S) / gamma AS BIGINT)``
      (DuckDB's DOUBLE to BIGINT cast rounds half to even, as numpy's rint; sql/native.sql's clipped route does the
      same) summed exactly (HUGEINT) per group: :func:`dpsql.core.primitives.fixed_point_sum`'s integers.
    * :meth:`MeanDuckSource.derived`: a source over ``|v - c_g|`` (not clamped: up to 2**1001), the cap's input, whose
      bucket and tail passes are the median's over that expression (c joined per group in each pass).

    Per-group parameters (c, e0, l, h, S, gamma) are registered Arrow tables joined on the group keys, as the median's
    passes do (literals in a one-group pass, :func:`_inline`); they are released values.  The passes' number and
    their statements up to those literals are functions of the released counts (the route classes, the ladders).
    """

    def radius_histogram(self, groups, c, s0, first=None):  # noqa: ANN001, ANN201, D102
        self._registered = []
        m, ex = np.frexp(np.asarray(s0, dtype=np.float64))
        if np.any(m != 0.5):
            raise ValueError("summary plans: the radius ladder's s0 must be powers of two")
        e0 = ex.astype(np.int64) - 1
        c = np.asarray(c, dtype=np.float64)
        groups = np.asarray(groups, dtype=np.int64)
        with np.errstate(over="ignore"):
            pq = np.ldexp(1.0, e0 + (RADIUS_QUERIES - 5) // 2)
        cols: dict[str, np.ndarray] = {"_c": c, "_e0": e0, "_s0": np.ldexp(1.0, e0), "_pq": pq}
        fuse = first is not None and self.FUSE_FIRST
        sh = self._first_shift(first, cols) if fuse else ""
        src = self._params(groups, cols)
        Q = RADIUS_QUERIES
        carry = "".join(f", p.{name} AS {name}" for name in cols)
        # _d = _v - _c; v = |_d| (the derived source's value) as its IEEE bits _b (the sign bit masked: _d may be
        # -0.0), biased exponent _E and fraction field _f.  A normal v (_E > 0) is 2**_ex (1 + _f 2**-52) exactly:
        # _ex = _E - 1023 and _pw = 2**_ex = v / (1 + _f 2**-52) (1 + _f 2**-52 is exact, and so is the quotient:
        # an exact result is correctly rounded), and the cap's first key is _exm_key's _b >> sh; v = 0 and subnormal
        # v (rare) take :meth:`DuckSource._exm`'s expressions and _exm_key's tag.  So _ex and _pw are _exm's and
        # the key decodes to _exm's bits, without a log2, an exact-floor CASE, a pow and a division per row
        bits = f"CAST(CAST(abs(_d) AS BIT) AS BIGINT) & {(1 << 63) - 1}"
        rows = (f"SELECT *, _b >> 52 AS _E, _b & {_FRACTION} AS _f FROM (SELECT *, {bits} AS _b FROM "
                f"(SELECT *, _v - _c AS _d FROM (SELECT p._g AS _g{carry}, {_VC} AS _v FROM {src} WHERE {_VALID})))")
        a, la = "abs(_d)", f"log2(greatest(abs(_d), {_TINY}))"
        ex = (f"CASE WHEN _E > 0 THEN _E - 1023 WHEN _b = 0 THEN {core_summary.ZERO_EXPONENT} "
              f"ELSE {_floor_log2(a, la)} END")
        rows = f"SELECT *, {ex} AS _ex FROM ({rows})"
        pw = f"CASE WHEN _E > 0 THEN {a} / (1.0 + CAST(_f AS DOUBLE) * {2.0 ** -52!r}) ELSE pow(2.0, _ex) END"
        h = f"{a} >= _pw * {_SQRT2}"
        # v = c: index 1 (x_1 = 0); else k0' = 2 (_ex - e0) + _h + 3 (_h: v at or above 2**_ex sqrt 2) and the window
        # from k_a (class docstring).  One side of the range decides: _w <= _cs + x is v <= c + x above c and
        # v >= c - x below it
        k0 = f"(2 * (_ex - _e0) + ({h})::BIGINT + 3)"
        side = (f"SELECT *, greatest(2, least({Q}, _k0) - 3) AS _ka, _sg * _v AS _w, _sg * _c AS _cs FROM "
                f"(SELECT *, {k0} AS _k0, CAST(sign(_d) AS DOUBLE) AS _sg FROM (SELECT *, {pw} AS _pw FROM ({rows})))")
        # P = 2**(e0 + (k_a - 2) // 2) = 2**clamp(_ex - 1, e0, e0 + (Q - 5) // 2): (k_a - 2) // 2 is nondecreasing
        # in k0', _ex - e0 - 1 where k_a is not clamped, at most 0 where it is clamped at 2 and at least (Q - 5) // 2
        # where at Q - 3.  As doubles: clamp(_pw / 2, 2**e0, 2**(e0 + (Q - 5) // 2)) (_pw / 2 is exact unless
        # _ex - 1 < -1074 <= e0, where the clamp gives 2**e0 anyway), the bounds per-group constants (ldexp: pow's
        # exact powers of two, inf where it overflows); no CASE, no pow per row.  (_ra, _rb: _x_at's A and B;
        # P * (1 + par (fl(sqrt 2) - 1)) is P or P * sqrt(2.0), P * (fl(sqrt 2) + par (2 - fl(sqrt 2))) is
        # P * sqrt(2.0) or P * 2.0, the differences exact (Sterbenz), par = (k_a - 2) % 2 = k_a & 1 as k_a >= 2;
        # DuckDB's names ignore case)
        pw = "greatest(least(_pw * 0.5, _pq), _s0)"
        base = (f"SELECT *, _P * (1.0 + _par * ({_SQRT2} - 1.0)) AS _ra, _P * ({_SQRT2} + _par * (2.0 - {_SQRT2})) "
                f"AS _rb FROM (SELECT *, {pw} AS _P, CAST(_ka & 1 AS DOUBLE) AS _par FROM ({side}))")
        outside = ", ".join(f"_w > _cs + {_x_at(t)} AS _o{t}" for t in range(WIDTH))
        # the first index inside is _ka + (number of window indices outside): the predicate is monotone in k
        k = " + ".join(["_ka"] + [f"_o{t}::BIGINT" for t in range(WIDTH - 1)])
        # the bug guard: the window's first index inside (and above 2), or its last outside.  v = c (exactly when
        # _d = 0, i.e. _b = 0: _ex is ZERO_EXPONENT, so _ka = 2, and _sg = 0 makes every flag false): k = 2 - 1 = 1,
        # and the guard holds
        bad = f"((NOT _o0 AND _ka > 2) OR _o{WIDTH - 1})"
        # the cap's first bucket key: _exm_key of v >= 0 (the bits shifted; v = 0 and subnormals tagged)
        more = f", CASE WHEN _E > 0 THEN _b >> {sh} ELSE {_SUB_TAG} + _f END AS _ek" if fuse else ""
        flags = (f"SELECT _g, least({Q}, {k}) - (_b = 0)::BIGINT AS k, {bad} AS _bad{more} "
                 f"FROM (SELECT *, {outside} FROM ({base}))")
        if not fuse:
            t = self._run(f"SELECT _g, k, count(*) AS c, count_if(_bad) AS bad FROM ({flags}) GROUP BY ALL "
                          f"ORDER BY _g, k")
        else:
            t = self._run(f"SELECT _g, k, _ek, count(*) AS c, count_if(_bad) AS bad FROM ({flags}) GROUP BY ALL")
        if _np(t, "bad").any():
            raise RuntimeError("summary plans: the radius pass's window missed a row's ladder index (a bug)")
        if not fuse:
            return _np(t, "_g"), _np(t, "k"), _np(t, "c")
        # one hash aggregate over (_g, k, _ek) (k and the exponent go together: a few thousand keys), summed here
        # to both histograms (GROUPING SETS materialized every row first: slower than the two passes)
        g, kk, n = _np(t, "_g"), _np(t, "k"), _np(t, "c")
        first = np.broadcast_to(np.asarray(first, dtype=np.int64), (groups.size,))
        _, ex, mm = _exm_decode(_np(t, "_ek"), core_summary.RAW_BITS - first[g])
        hg, hk, hc = _sum_by(n, g, kk)
        dg, dex, dm, dc = _sum_by(n, g, ex, mm)
        # the derived source's first bucket pass (its groups are local: 0 .. groups.size - 1), for derived(groups, c)
        part = (np.arange(groups.size, dtype=np.int64), np.asarray(first, dtype=np.int64).copy(), dg,
                np.zeros(dg.size, dtype=bool), dex, dm, dc)
        self._cap_first = (groups.copy(), c.copy(), part)
        return hg, hk, hc

    def clipped_sums(self, groups, l, h, c, sens):  # noqa: ANN001, ANN201, D102
        self._registered = []
        G = groups.size
        S, gamma = fixed_point_grid(np.broadcast_to(np.asarray(sens, dtype=np.float64), (G,)))
        cols = {"_l": np.asarray(l, dtype=np.float64), "_h": np.asarray(h, dtype=np.float64), "_S": S, "_gm": gamma}
        y = f"greatest(least({_VC}, p._h), p._l)"
        if c is not None:
            cols["_cc"] = np.asarray(c, dtype=np.float64)
            y = f"({y} - p._cc)"
        src = self._params(groups, cols)
        k = f"CAST(greatest(least({y}, p._S), -p._S) / p._gm AS BIGINT)"
        t = self._run(f"SELECT p._g AS _g, CAST(sum({k}) AS BIGINT) AS s FROM {src} WHERE {_VALID} GROUP BY p._g")
        out = np.zeros(G, dtype=np.int64)
        out[_np(t, "_g")] = _np(t, "s")
        return out

    def derived(self, groups: np.ndarray, c: np.ndarray) -> DuckSource:  # noqa: D102
        groups, c = np.asarray(groups, dtype=np.int64), np.asarray(c, dtype=np.float64)
        d = _Derived(self, groups, c)
        kept, self._cap_first = getattr(self, "_cap_first", None), None
        if kept is not None and np.array_equal(kept[0], groups) and np.array_equal(kept[1], c):
            d._first_parts = [kept[2]]  # counted in the radius pass (radius_histogram's ``first``)
        return d


class _Derived(DuckSource):
    """The rows of a parent's ``groups`` (group i = groups[i]) with value ``|v - c[i]|`` (v the parent's clamped
    value; the difference as numpy computes it, not clamped again).  Its passes count into the parent's.

    The passes read the parent's rows joined once with the pass's per-group parameters, c among them (``_dc``):
    the value is an expression over the joined row, and the rows are the parent's valid ones (``|v - c|`` is
    never NULL or NaN for a valid v and a finite c).  (A join of c per group under the parameters' join made two
    hash joins per pass for grouped queries.)"""

    VALUE = f"abs({_VC} - p._dc)"

    def __init__(self, parent: MeanDuckSource, groups: np.ndarray, c: np.ndarray) -> None:
        self.con, self.plan, self.rng, self.parent = parent.con, parent.plan, parent.rng, parent
        self.groups = parent.groups.take(pa.array(groups)) if parent.plan.keys else parent.groups
        self.n, self.rows = parent.n[groups], parent.rows[groups]
        self.c = c
        self.base = parent.base
        self.passes = 0
        self._registered = []

    def _params(self, groups: np.ndarray, cols: dict[str, np.ndarray], base: str | None = None) -> str:
        return super()._params(groups, {**cols, "_dc": self.c[groups]}, base)

    def _run(self, sql: str, params: dict | None = None):  # noqa: ANN202
        self.parent.passes += 1
        return super()._run(sql, params)


def _sum_by(n: np.ndarray, *keys: np.ndarray) -> tuple[np.ndarray, ...]:
    """The sums of ``n`` per distinct tuple of ``keys`` (int64 arrays), sorted by the keys: (key arrays..., sums)."""
    if not n.size:
        return (*(k[:0] for k in keys), n[:0])
    order = np.lexsort(keys[::-1])
    ks = [k[order] for k in keys]
    new = np.zeros(n.size, dtype=bool)
    new[0] = True
    for k in ks:
        new[1:] |= k[1:] != k[:-1]
    start = np.flatnonzero(new)
    return (*(k[start] for k in ks), np.add.reduceat(n[order], start).astype(np.int64))


def _sort_segments(values: np.ndarray, offsets: np.ndarray, groups: range | np.ndarray) -> None:
    """Sort ``values`` in place inside each of ``groups`` (indices into ``offsets``): one ``ndarray.sort`` per
    group, as :meth:`dpsql.core.batch.Batch.sorted` (numpy has no segmented sort; the sort releases the GIL)."""
    lo = offsets[:-1][groups].tolist()
    hi = offsets[1:][groups].tolist()
    for a, b in zip(lo, hi, strict=True):
        if b - a > 1:
            values[a:b].sort()


def _sort_groups(b: Batch) -> SortedBatch:
    """``b.sorted()`` for a batch owning its values (:meth:`DuckSource._batch`), sorted in place: the same
    values group by group without :meth:`~dpsql.core.batch.Batch.sorted`'s copy (a
    :class:`~dpsql.core.batch.SortedBatch`: no reference cycle)."""
    _sort_segments(b.values, b.offsets, range(b.groups))
    return SortedBatch(b.values, b.offsets)


class _Piece:
    """One piece of the hybrid route's rows (:meth:`DuckSource.will_batch`): its rows grouped and cleaned
    (:meth:`DuckSource._batch`), sorted within groups part by part as the core asks for them.  The part asked for
    is sorted by the caller (unless done); the piece's other parts are sorted meanwhile in one worker thread, in
    the announced order, while the core runs the list code on the earlier parts (numpy's sort releases the GIL:
    on a second core the sorting hides behind the mechanisms).  A lock per part makes each part sorted exactly
    once, by whichever thread takes it first; the caller waits for a part the worker is sorting.  The result is
    the same sorted values group by group whoever sorts (the sort's output is a function of the segment's
    values), so no release and no draw changes; what runs where, and when, is a function of the sizes (the parts
    and pieces: released counts) only.  A worker that fails leaves its parts to the caller (which then raises)."""

    def __init__(self, index: int, groups: np.ndarray, rows: Batch, parts: list[np.ndarray]) -> None:
        self.index, self.groups, self.values, self.offsets = index, groups, rows.values, rows.offsets
        self.parts = [np.searchsorted(groups, p) for p in parts]
        self.part_of = np.zeros(groups.size, dtype=np.int64)
        for j, p in enumerate(self.parts):
            self.part_of[p] = j
        self.locks = [threading.Lock() for _ in self.parts]
        self.done = [False] * len(self.parts)
        self.worker: threading.Thread | None = None
        if len(self.parts) > 1:
            self.worker = threading.Thread(target=self._work, name="dpsql-rows-sort", daemon=True)
            self.worker.start()

    def _sort(self, j: int) -> None:
        with self.locks[j]:
            if not self.done[j]:
                _sort_segments(self.values, self.offsets, self.parts[j])
                self.done[j] = True

    def _work(self) -> None:
        try:
            for j in range(1, len(self.parts)):
                self._sort(j)
        except BaseException:  # noqa: BLE001 - the caller sorts what is left (and raises there)
            return

    def take(self, groups: np.ndarray) -> SortedBatch:
        """The sorted rows of ``groups`` (ascending, all in this piece): their parts sorted first."""
        idx = np.searchsorted(self.groups, groups)
        for j in np.unique(self.part_of[idx]).tolist():
            self._sort(j)
        return take_groups(SortedBatch(self.values, self.offsets), idx)

    def close(self) -> None:
        """Wait for the worker (the next piece's pass then runs alone)."""
        if self.worker is not None:
            self.worker.join()
            self.worker = None


def _group_order(g: np.ndarray, G: int) -> np.ndarray:
    """An order of the rows that groups them by ``g`` (in ``[0, G)``, any integer type) ascending: numpy's
    radix sort on 16-bit digits (one pass below 2**16 groups, two above)."""
    if G <= 1 << 16:
        return np.argsort(g if g.dtype == np.uint16 else g.astype(np.uint16), kind="stable")
    o = np.argsort((g & 0xFFFF).astype(np.uint16), kind="stable")
    return o[np.argsort((g[o] >> 16).astype(np.uint16), kind="stable")]


def _value_range(lo: np.ndarray, hi: np.ndarray, shift: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float bounds holding every value whose raw bucket at ``shift`` lies in [lo, hi] (inclusive, a superset:
    the passes filter exactly after)."""
    rv = core_summary.raw_value
    r_lo = core_summary.bucket_ends(lo, shift)[0]
    r_hi = core_summary.bucket_ends(hi, shift)[1]
    with np.errstate(over="ignore"):
        v_lo = np.where(r_lo > 0, rv(r_lo, e), -rv(np.abs(r_lo) + 1, e))
        v_hi = np.where(r_hi >= 0, rv(r_hi + 1, e), -rv(np.abs(r_hi), e))
    return np.nan_to_num(v_lo, nan=-np.inf), np.nan_to_num(v_hi, nan=np.inf)


@contextlib.contextmanager
def materialized(con: duckdb.DuckDBPyConnection, plan: Plan) -> Iterator[Plan]:
    """``plan`` over its input computed once: a TEMP table (in the connection's in-memory ``temp`` catalog) of
    the plan's keys ``_k0, ...`` and of each distinct value expression ``CAST(value AS DOUBLE)`` as ``_x0, ...``
    (what the passes read, nothing else), and a plan reading it; the table is dropped on exit, also on failure.

    Why: the passes (count, rows, gap, bucket and tail passes) each evaluate ``plan.source`` again.  A source
    with a random part (the guard's ``_dpsql_rand()`` choice of which rows of a privacy unit to keep) would
    draw a new choice in every pass, so the count pass and the later passes would see different rows; the list
    route evaluates its source once.  Materialized, every pass sees the same rows: the ones one evaluation of
    the source chose, as the list route's.  Privacy and cost: the rows the mechanism reads have the law they
    have under the list route (one evaluation of the same source), and the plans release the list route's law
    on given rows, so the release's law and its cost (the guard's) are unchanged; the table is never released.
    Time and memory: one scan of the source and 8 bytes per row and value plus the keys, a function of the row
    count (and of the keys' widths, as any scan); the statement count is fixed."""
    values = list(dict.fromkeys(c.value for c in plan.calls))
    name = f'temp.main."_dpsql_plan_src{next(DuckSource._ids)}"'
    cols = [f"{k} AS _k{i}" for i, k in enumerate(plan.keys)]
    cols += [f"CAST({v} AS DOUBLE) AS _x{j}" for j, v in enumerate(values)]
    try:
        con.execute(f"CREATE TEMP TABLE {name} AS SELECT {', '.join(cols)} {plan.source}")
        yield dataclasses.replace(plan, source=f"FROM {name}", keys=tuple(f"_k{i}" for i in range(len(plan.keys))),
                                  calls=tuple(dataclasses.replace(c, value=f"_x{values.index(c.value)}")
                                              for c in plan.calls))
    finally:
        try:
            con.execute(f"DROP TABLE IF EXISTS {name}")
        except duckdb.Error:  # interrupted while dropping (a late cancel): once more
            con.execute(f"DROP TABLE IF EXISTS {name}")


def volatile(sql: str) -> bool:
    """Whether the text of ``sql`` may draw something new each time it is evaluated: ``random()``, a UUID,
    ``TABLESAMPLE`` / ``USING SAMPLE``, or any function sqlglot does not know as a built-in (a UDF may draw; the
    dp_* calls themselves excepted).  Conservative: a hit only costs a materialization.  Views and macros that
    draw are not visible in the text (:func:`run`'s docstring)."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.ParseError:
        return True
    return _draws(tree)


def _draws(tree: exp.Expression) -> bool:
    for node in tree.walk():
        if isinstance(node, (exp.Rand, exp.Uuid, exp.TableSample)):
            return True
        if isinstance(node, exp.Anonymous) and str(node.name).lower() not in _DP and \
                str(node.name).lower() not in _VAR:
            return True
    return False


def run(con: duckdb.DuckDBPyConnection, sql: str | Plan, rng: Rng | None = None, *,
        materialize: bool | None = None) -> pa.Table:
    """Run ``sql`` (trusted mode) and return its result: through summary plans when :func:`compile_query` owns
    it (or ``sql`` is a compiled plan), else as written (the plain macros; ``dpsql.install(con)`` first).
    ``rng``: a seeded generator, for tests only; production noise and matchings come from the OS CSPRNG.
    ``materialize``: the passes read the plan's input computed once (:func:`materialized`), as they must when
    the source is not deterministic: each pass evaluates the source again, and the proofs (and the list route's
    law) need every pass to see the same rows.  The guarded front doors always materialize
    (:meth:`dpsql.executor.Executor.run`: the guard's rewrite draws ``_dpsql_rand()``); the default (None)
    materializes when :func:`volatile` finds a drawing construct in the query text.  A source that changes
    between statements in a way the text does not show (a view or macro over ``random()``, another connection
    writing to the table meanwhile) needs ``materialize=True``, or a table the caller materialized."""
    plan = compile_query(sql) if isinstance(sql, str) else sql
    if plan is None or (isinstance(sql, str) and not _types_ok(con, plan)):
        return _fetch(con, sql)
    if materialize is None:
        materialize = isinstance(sql, str) and plan.draws
    if materialize:
        with materialized(con, plan) as local:
            return run(con, local, rng)
    rng = system_rng() if rng is None else rng
    keys = ", ".join(f"{k} AS _k{i}" for i, k in enumerate(plan.keys))
    xs = ", ".join([f"count(*) FILTER (WHERE _x{j} IS NOT NULL AND NOT isnan(_x{j})) AS _n{j}"
                    for j in range(len(plan.calls))] + ["count(*) AS _rows"])
    vals = ", ".join(f"CAST({c.value} AS DOUBLE) AS _x{j}" for j, c in enumerate(plan.calls))
    inner = f"SELECT {keys + ', ' if keys else ''}{vals} {plan.source}"
    # the groups in key order: the seeded draws (tests) then meet the groups in one order whatever DuckDB's threads do
    # (which groups share a pass, and so a statement's text, follows the released counts each group draws)
    order = ", ".join(f"_k{i}" for i in range(len(plan.keys)))
    groups = _fetch(con, f"SELECT {order + ', ' if keys else ''}"
                         f"{xs} FROM ({inner}) {f'GROUP BY ALL ORDER BY {order}' if keys else ''}")
    key_table = groups.select([f"_k{i}" for i in range(len(plan.keys))])
    rows = _np(groups, "_rows")
    srcs = [_source_class(c)(con, plan, j, key_table, _np(groups, f"_n{j}"), rng, rows)
            for j, c in enumerate(plan.calls)]
    n_hat = [_released_count(s, c, rng) for s, c in zip(srcs, plan.calls, strict=True)]
    fetched: dict[str, DuckSource] = {}  # the hybrid route: one rows pass per value expression, if they fit
    for value in dict.fromkeys(c.value for c in plan.calls):
        js = [j for j, c in enumerate(plan.calls) if c.value == value]
        few = [_row_groups(n_hat[j], plan.calls[j]) for j in js]
        every = np.unique(np.concatenate([np.zeros(0, dtype=np.int64), *few]))
        released = np.max([np.maximum(n_hat[j][every], 1.0) for j in js], axis=0).sum() if every.size else 0.0
        if every.size and released <= ROWS_PASS_ROWS:
            srcs[js[0]].fetch_rows(every)
            fetched[value] = srcs[js[0]]
    out = []
    for j, call in enumerate(plan.calls):
        src = srcs[j]
        if call.value in fetched:
            src.share_rows(fetched[call.value])
        if call.aggregate in _VAR.values():
            out.append(_variance(src, call, n_hat[j], rng))
        elif call.aggregate in ("mean", "sum"):
            out.append(getattr(summary_mean, call.aggregate)(src, call.epsilon, rng, n_hat=n_hat[j], small=SMALL_ROWS))
        elif call.aggregate == "iqr":
            out.append(core_summary.iqr(src, call.epsilon, rng, n_hat=n_hat[j], small=SMALL_ROWS))
        elif call.p == 0.5:
            out.append(core_summary.median(src, call.epsilon, rng, n_hat=n_hat[j], small=SMALL_ROWS))
        else:
            out.append(core_summary.quantile(src, call.epsilon, rng, call.p, n_hat=n_hat[j], small=SMALL_ROWS))
        src.drop_rows()
    arrays, names = [], []
    for kind, i, name in plan.columns:
        names.append(name)
        if kind == "key":
            arrays.append(groups.column(f"_k{i}"))
        else:
            v = out[i]
            arrays.append(pa.array(v, type=pa.float64(), mask=np.isnan(v)))
    return pa.table(arrays, names=names)


#: the value types the macros' ``x DOUBLE`` overload takes (an implicit cast to DOUBLE; DECIMAL(p, s) besides)
_NUMERIC = frozenset({'"NULL"', "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                      "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "BIGNUM", "VARINT"})
#: a BIT anywhere in a key's type (also nested; a field named bit matches too: then the macros answer)
_BIT = re.compile(r"\bBIT\b", re.IGNORECASE)


def _types_ok(con: duckdb.DuckDBPyConnection, plan: Plan) -> bool:
    """Whether the plans take the plan's types, from the schema only (the relation is bound, never run): every
    call's value numeric and no group key holding a BIT.  A value of any other type (VARCHAR, BOOLEAN, DATE, ...)
    goes to the macros, which refuse it by its type (DPSQL-E060, before reading a row); the passes'
    ``CAST(value AS DOUBLE)`` would instead fail or not on the values (a VARCHAR row that does not parse, its text
    quoted in the message) or release a number.  A BIT key comes back from Arrow as a BLOB of DuckDB's internal
    bytes, so the passes' join of the registered keys to the rows (:meth:`DuckSource._params`) matches no row and
    every release would be a function of the count alone.  A type not listed here also goes to the macros (their
    law, only slower)."""
    keys = [f"{k} AS _k{i}" for i, k in enumerate(plan.keys)]
    values = [f"{c.value} AS _x{j}" for j, c in enumerate(plan.calls)]
    try:
        types = [str(t) for t in con.sql(f"SELECT {', '.join(keys + values)} {plan.source}").types]
    except duckdb.Error:  # the macros' statement then raises its own error
        return False
    key_types, value_types = types[:len(keys)], types[len(keys):]
    return (all(t in _NUMERIC or t.startswith("DECIMAL(") for t in value_types)
            and not any(_BIT.search(t) for t in key_types))


def _source_class(call: Call) -> type[DuckSource]:
    """The source of a call: the mean's and the sum's have their extra passes (:class:`MeanDuckSource`)."""
    if call.aggregate in ("mean", "sum"):

        return MeanDuckSource
    return DuckSource


def _variance(src: DuckSource, call: Call, n_hat: np.ndarray, rng: Rng) -> np.ndarray:
    """dp_var or dp_stddev, its square root (post-processing, as the binding's).  ``asymmetric``:
    :func:`dpsql.core.summary_var.variance` on :class:`dpsql.plans.var.DuckVarSource` (the small groups from the
    rows pass, the others from two summary passes).  The default (:mod:`dpsql.core.moments`): the same for the
    groups its released count puts in the asymmetric class, then :func:`_moments` for the others, in the list
    route's order."""
    if call.method == "asymmetric":
        v = core_var.variance(DuckVarSource(src), call.epsilon, rng, n_hat=n_hat, small=SMALL_ROWS)
    else:
        low, top = core_moments.classes(n_hat, call.epsilon)
        v = np.zeros(n_hat.size)
        if low.size:
            v[low] = core_var.variance(DuckVarSource(src), call.epsilon, rng, n_hat=n_hat, small=SMALL_ROWS,
                                       groups=low)
        if top.size:
            v[top] = _moments(src, top, call.epsilon, rng)
    return np.sqrt(np.maximum(v, 0.0)) if call.aggregate == "stddev" else v


def _moments(src: DuckSource, top: np.ndarray, eps: float, rng: Rng) -> np.ndarray:
    """dp_var's top class (:func:`dpsql.core.moments.moments`) on the groups ``top`` of ``src``: the mean
    (:func:`dpsql.core.summary_mean.mean`) on a source over those groups' rows, then the mean of
    ``min((x - c)**2, DOMAIN)`` on a source whose value is that square (the list route's floats: the clamped x, one
    IEEE subtraction and one product, clamped by the passes' own ``_VC``; NaN and NULL rows stay invalid), c joined
    per group from a registered table of the released means.  Each source draws as the list route's mechanism on
    the same groups (the summary routes' tests), so the releases are the list route's."""
    keys = src.groups.take(pa.array(top)) if src.plan.keys else src.groups
    n, rows = src.n[top], src.rows[top]

    def sub() -> MeanDuckSource:
        return MeanDuckSource(src.con, src.plan, src.call, keys, n, rng, rows)

    def mean(e: float) -> np.ndarray:
        x = sub()
        try:
            return summary_mean.mean(x, e, rng, small=SMALL_ROWS)
        finally:
            x.drop_rows()

    def squares(c: np.ndarray, e: float) -> np.ndarray:
        y = sub()
        c = np.asarray(c, dtype=np.float64)
        name = f"_dpsql_plan_centre{next(DuckSource._ids)}"
        # one group: c as an exact literal (the passes' own join keeps the group's rows; no join), as every
        # one-group pass inlines its released parameters (DuckSource.INLINE)
        one = top.size == 1 and DuckSource.INLINE
        ks = "".join(f"b._k{i} AS _k{i}, " for i in range(len(src.plan.keys)))
        if one:
            cc, frm = _literal(c), f"{src.base} b"
        else:
            cs = pa.array(c)
            src.con.register(name, keys.append_column("_sqc", cs) if src.plan.keys else pa.table({"_sqc": cs}))
            # alias sq, not p: the passes inline their own parameters' ``p.<col>`` (:func:`_inline`), and the
            # clipped sums' centre is p._cc
            on = " AND ".join(f"b._k{i} IS NOT DISTINCT FROM sq._k{i}" for i in range(len(src.plan.keys)))
            cc, frm = "_sqc", f"{src.base} b {f'JOIN {name} sq ON {on}' if on else f'CROSS JOIN {name} sq'}"
        # d = clamped x - c in a projection of its own (written twice in one expression it was computed twice: the
        # passes over the squares took 1.5-3.4x those over x, 1.2-2x with this; 10**7 rows), then d * d; NaN stays
        # NaN (an invalid row, as x's): DuckDB orders NaN above every number, so _VC would clamp it to 2**1000 and
        # make it a valid row; NULL stays NULL.  The rows are the source's, one per row of x
        kk = "".join(f"_k{i}, " for i in range(len(src.plan.keys)))
        inner = f"SELECT {ks}b._x AS _xq{'' if one else ', sq._sqc'} FROM {frm}"
        y.base = (f"(SELECT {kk}CASE WHEN isnan(_xq) THEN _xq ELSE _d * _d END AS _x FROM (SELECT {kk}_xq, "
                  f"{_VC.replace('_x', '_xq')} - {cc} AS _d FROM ({inner})))")
        try:
            return summary_mean.mean(y, e, rng, small=SMALL_ROWS)
        finally:
            y.drop_rows()
            if not one:
                src.con.unregister(name)

    return core_moments.moments(mean, squares, eps)


def _released_count(src: DuckSource, call: Call, rng: Rng) -> np.ndarray:
    """A call's released count, its first draw (:func:`dpsql.core.summary.released_count`,
    :func:`dpsql.core.summary_mean.released_count`)."""
    if call.aggregate in _VAR.values():
        return core_var.released_count(src, call.epsilon, rng)
    if call.aggregate in ("mean", "sum"):
        return summary_mean.released_count(src, call.epsilon, rng)
    return core_summary.released_count(src, call.epsilon, rng, call.p)


def _row_groups(n_hat: np.ndarray, call: Call) -> np.ndarray:
    """The groups a call reads as rows (the hybrid route), from its released count."""
    if call.aggregate in _VAR.values():
        rows = core_var.row_groups(n_hat, SMALL_ROWS)
        return rows if call.method == "asymmetric" else np.intersect1d(rows, core_moments.classes(n_hat,
                                                                                                 call.epsilon)[0])
    if call.aggregate in ("mean", "sum"):
        return summary_mean.row_groups(n_hat, call.epsilon, call.aggregate, SMALL_ROWS)
    return core_summary.row_groups(n_hat, call.epsilon, call.p, SMALL_ROWS)


ParameterError = ParameterError  # re-exported: a bad epsilon raises it, naming the argument
