"""Summary plans (issue 17): the random matching behind the floor (``dpsql.plans.matching_words``).

The floor's privacy proof (seed 003's coupling, :func:`dpsql.core.ranges.iqr_lower_bound`) needs each group's
matching uniform over its maximal matchings and independent of the values.  The SQL gives every row a fresh
CSPRNG word (joined by position), orders each group by it and pairs consecutive rows; here: (1) the matchings of
4 rows are uniform over 3000 groups (chi2), through the real gap pass; (2) why DuckDB's salted hash is not used
instead (it is XOR-separable: the salt flips bits of a fixed per-row value, and some matchings are never drawn);
(3) the gap histogram's law on tied data equals the list route's (:func:`~dpsql.core.ranges.random_pairs`);
(4) tied keys void the pass and it reruns with new keys (on a Poisson subsample, only the kept rows' matching: the
coins stand).
"""

from __future__ import annotations

import itertools

import duckdb
import numpy as np
import pyarrow as pa
from scipy.stats import chi2_contingency, chisquare

from dpsql import plans
from dpsql.core import summary
from dpsql.core.batch import Batch
from dpsql.noise import Rng

SALTS = 3000


def _trie_split_ids(con: duckdb.DuckDBPyConnection, m: int) -> list[int]:
    """m ids: m/2 whose DuckDB hash has top bit 0 and m/2 with top bit 1 (a salt flips the top bit of all or
    none, so under ``hash(id, salt)`` the two halves never interleave)."""
    h = dict(con.sql("SELECT i, hash(i, 0::BIGINT) >> 63 FROM range(1, 64) t(i)").fetchall())
    lo = [i for i, b in h.items() if b == 0][: m // 2]
    hi = [i for i, b in h.items() if b == 1][: m // 2]
    return lo + hi


def _hash_matchings(con: duckdb.DuckDBPyConnection, ids: list[int]) -> np.ndarray:
    """Per salt, the matching of ``ids`` under ``ORDER BY hash(id, salt)`` (index among the perfect matchings)."""
    con.register("s", pa.table({"salt": np.random.default_rng(7).integers(0, 2**62, SALTS), "sid": np.arange(SALTS)}))
    con.register("r", pa.table({"rid": np.array(ids, dtype=np.int64)}))
    rows = con.sql("SELECT sid, rid, row_number() OVER (PARTITION BY sid ORDER BY hash(rid, salt)) AS pos "
                   "FROM s CROSS JOIN r ORDER BY sid, pos").fetchall()
    all_m = sorted({tuple(sorted(tuple(sorted(p)) for p in zip(perm[::2], perm[1::2], strict=True)))
                    for perm in itertools.permutations(ids)})
    index = {m: i for i, m in enumerate(all_m)}
    out = np.empty(SALTS, dtype=np.int64)
    for sid in range(SALTS):
        order = [rid for _, rid, _ in rows[sid * len(ids):(sid + 1) * len(ids)]]
        out[sid] = index[tuple(sorted(tuple(sorted(p)) for p in zip(order[::2], order[1::2], strict=True)))]
    return np.bincount(out, minlength=len(all_m))


def test_matching_is_uniform() -> None:
    """Rows 0, 1, 3, 7 in 3000 groups: each of the 3 matchings has its own gap exponents ({0, 2}, {2, 3},
    {1, 3}); their counts pass a chi2 test against 1/3 each."""
    G = SALTS
    con = duckdb.connect()
    con.register("t", pa.table({"g": np.repeat(np.arange(G), 4), "x": np.tile([0.0, 1.0, 3.0, 7.0], G)}))
    plan = plans.compile_query("SELECT g, dp_median(x, epsilon := 1) FROM t GROUP BY g")
    src = plans.DuckSource(con, plan, 0, pa.table({"_k0": np.arange(G)}), np.full(G, 4), Rng.seeded(3))
    g, k, c = src.gap_histogram(np.arange(G), Rng.seeded(3))
    sig = np.zeros(G, dtype=np.int64)
    np.add.at(sig, g, c * (1 << (2 * k)))  # exponents 0..3 as base-4 digits
    which = {1 + 16: 0, 16 + 64: 1, 4 + 64: 2}
    counts = np.bincount([which[int(v)] for v in sig], minlength=3)
    assert chisquare(counts).pvalue > 1e-3, counts


def test_duckdb_salted_hash_is_xor_separable_and_not_uniform() -> None:
    """The rejected design: hash(i, s1) xor hash(i, s2) is one constant for all i, and on the trie-split rows
    ``ORDER BY hash(id, salt)`` leaves matchings out entirely, for every salt."""
    con = duckdb.connect()
    assert con.sql("SELECT count(DISTINCT xor(hash(i, 12345::BIGINT), hash(i, 999::BIGINT))) "
                   "FROM range(1000) t(i)").fetchall() == [(1,)]
    counts = _hash_matchings(con, _trie_split_ids(con, 4))
    assert np.count_nonzero(counts) < counts.size, counts


def _zero_gap_counts(g: np.ndarray, k: np.ndarray, c: np.ndarray, G: int) -> np.ndarray:
    zero = k == summary.GAP_ZERO
    return np.bincount(g[zero], weights=c[zero], minlength=G).astype(np.int64)


def test_gap_histogram_law_equals_the_list_routes() -> None:
    """Tied data (1 1 1 1 2 2 3 4 5): the number of zero-gap pairs per group, 3000 groups, DuckDB's keyed
    matching against random_pairs (chi2 on the count's distribution)."""
    d = np.array([1, 1, 1, 1, 2, 2, 3, 4, 5], dtype=float)
    G = 3000
    con = duckdb.connect()
    con.register("t", pa.table({"g": np.repeat(np.arange(G), d.size), "x": np.tile(d, G)}))
    plan = plans.compile_query("SELECT g, dp_median(x, epsilon := 1) FROM t GROUP BY g")
    keys = pa.table({"_k0": np.arange(G)})
    src = plans.DuckSource(con, plan, 0, keys, np.full(G, d.size), Rng.seeded(3))
    a = _zero_gap_counts(*src.gap_histogram(np.arange(G), Rng.seeded(3)), G)
    b = _zero_gap_counts(*summary.BatchSource(Batch.from_lists([d] * G)).gap_histogram(np.arange(G), Rng.seeded(4)),
                         G)
    table = np.array([np.bincount(a, minlength=5), np.bincount(b, minlength=5)])
    table = table[:, table.sum(axis=0) > 0]
    assert chi2_contingency(table).pvalue > 1e-3, table


def test_tied_keys_rerun_under_a_new_salt(monkeypatch) -> None:  # noqa: ANN001
    """With 6-bit keys ties are common: every pass that returns has no tie (one pair per group of 3 rows, as
    many pairs as rows // 2), and some passes were voided."""
    real = plans.matching_words
    monkeypatch.setattr(plans, "matching_words", lambda rng, n: (w >> np.uint64(58) for w in real(rng, n)))
    G = 40
    con = duckdb.connect()
    con.register("t", pa.table({"g": np.repeat(np.arange(G), 3), "x": np.tile([1.0, 2.0, 4.0], G)}))
    plan = plans.compile_query("SELECT g, dp_median(x, epsilon := 1) FROM t GROUP BY g")
    src = plans.DuckSource(con, plan, 0, pa.table({"_k0": np.arange(G)}), np.full(G, 3), Rng.seeded(1))
    rng = Rng.seeded(1)
    for _ in range(5):
        g, k, c = src.gap_histogram(np.arange(G), rng)
        assert np.array_equal(np.bincount(g, weights=c, minlength=G), np.ones(G))
    assert src.passes > 5  # P(no tie in 40 groups of 3 under 64 keys) ~ 0.15 per pass


def test_tied_keys_on_the_subsample_rerun_the_matching_only(monkeypatch) -> None:  # noqa: ANN001
    """Subsampled floor (rate 1/2): words whose top bit is the coin and whose order key has 6 bits.  Ties void
    the kept rows' matching pass, which reruns on the same kept rows: the coin pass runs once, every returned
    histogram is tie-free, and its pairs are the same kept rows' (as many per group as in the first attempt)."""
    real = plans.matching_words
    top = np.uint64(1 << 63)
    monkeypatch.setattr(plans, "matching_words",
                        lambda rng, n: ((w & top) | (w >> np.uint64(58)) for w in real(rng, n)))
    G = 40
    con = duckdb.connect()
    con.register("t", pa.table({"g": np.repeat(np.arange(G), 8), "x": np.tile(2.0 ** np.arange(8), G)}))
    plan = plans.compile_query("SELECT g, dp_median(x, epsilon := 1) FROM t GROUP BY g")
    src = plans.DuckSource(con, plan, 0, pa.table({"_k0": np.arange(G)}), np.full(G, 8), Rng.seeded(1))
    sqls, coins = [], []
    fetch = plans._fetch

    def counting(c, sql, params=None):  # noqa: ANN001, ANN202
        sqls.append(sql)
        out = fetch(c, sql, params)
        if "_tag" in sql:
            coins.append(out)
        return out

    monkeypatch.setattr(plans, "_fetch", counting)
    g, k, c = src.gap_histogram(np.arange(G), Rng.seeded(2), None, 0.5)
    assert len(coins) == 1 and len(sqls) > 2  # one coin pass, voided matchings
    kept = np.bincount(coins[0].column("_g").to_numpy(), minlength=G)
    assert 0 < kept.sum() < 8 * G
    assert np.array_equal(np.bincount(g, weights=c, minlength=G), kept // 2)
