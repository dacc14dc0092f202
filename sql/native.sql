-- dpsql: the hand-written helper macros of the dp_* macros (sql/macros.sql, generated from dpsql/surface.py
-- by python -m dpsql.macrogen).  dpsql.install(con) runs this file first.  Macros are TEMP so that install
-- works on read-only databases.

-- Native route of method := 'clipped' with both bounds (sum, mean, var, stddev): DuckDB computes the row
-- count and the exact integer fixed-point sums of dpsql.core.clipped.clipped_stats with the same float64
-- operations, and _dpsql_fin adds the noise; no list(x) is built.  Data rules as everywhere: NULL and NaN
-- rows are dropped (nullif(x, NaN) is NULL for both; NULL then propagates through the CASE clamps, and
-- sum and count skip it); values are clamped to [lower, upper] (the list route first clamps to +-2**1000,
-- which changes nothing here: the route needs |lower|, |upper| <= 2**1000).  Terms are
-- rint(clip(v, -S, S) / gamma) with S = max(s, 2**-1000) (9.332636185032189e-302 = 2**-1000 exactly) and
-- gamma = pow2_floor(S) * 2**-20, computed by the core's own fixed_point_grid through the constant UDF
-- _dpsql_fg, which DuckDB folds once when it binds the query (an exact pow2_floor in SQL repeated its
-- argument five times, and DuckDB copies a macro argument at every use: binding time grows with the
-- copies).  Everything but x is a literal, so DuckDB folds the constants and the CASE and drops the unused
-- branch with its aggregate.  tests/test_native.py checks that both routes compute the same statistics
-- and release the same numbers from the same seeded generator.
CREATE OR REPLACE TEMP MACRO _dpsql_xn(x) AS nullif(CAST(x AS DOUBLE), 'NaN'::DOUBLE);

-- v clamped to [lo, hi] (lo <= hi; NULL stays NULL).  A CASE, not least/greatest: those skip NULL and ran
-- 15-20 % slower per row here
CREATE OR REPLACE TEMP MACRO _dpsql_cl(v, lo, hi) AS CASE WHEN v < lo THEN lo WHEN v > hi THEN hi ELSE v END;

CREATE OR REPLACE TEMP MACRO _dpsql_v(x, lo, hi) AS _dpsql_cl(_dpsql_xn(x), CAST(lo AS DOUBLE), CAST(hi AS DOUBLE));

-- CAST(DOUBLE AS BIGINT) rounds half to even, as numpy's rint (checked in tests/test_native.py)
CREATE OR REPLACE TEMP MACRO _dpsql_ksum(v, s) AS
    CAST(coalesce(sum(CAST(_dpsql_cl(v, -greatest(s, 9.332636185032189e-302), greatest(s, 9.332636185032189e-302))
                           / _dpsql_fg(s) AS BIGINT)), 0) AS BIGINT);

CREATE OR REPLACE TEMP MACRO _dpsql_c(lo, hi) AS CAST(lo AS DOUBLE) / 2.0 + CAST(hi AS DOUBLE) / 2.0;

CREATE OR REPLACE TEMP MACRO _dpsql_h(lo, hi) AS CAST(hi AS DOUBLE) / 2.0 - CAST(lo AS DOUBLE) / 2.0;

-- bounds beyond +-2**1000 or whose squared half-width overflows take the list route (whose core raises
-- the parameter error for the latter)
CREATE OR REPLACE TEMP MACRO _dpsql_native(method, lower, upper) AS
    method = 'clipped' AND lower IS NOT NULL AND upper IS NOT NULL
    AND isfinite(_dpsql_h(lower, upper) * _dpsql_h(lower, upper))
    AND greatest(abs(CAST(lower AS DOUBLE)), abs(CAST(upper AS DOUBLE))) <= 1.0715086071862673e+301;

-- The statistics of the native route, per group: the count of non-NULL, non-NaN rows, and the integer
-- fixed-point sums of the clamped values (sum) or of their first and second moments about the centre of
-- [lower, upper] (mean, var); the generated macros pass them to _dpsql_fin.
CREATE OR REPLACE TEMP MACRO _dpsql_n(x) AS count(_dpsql_xn(x));

CREATE OR REPLACE TEMP MACRO _dpsql_k_sum(x, lower, upper) AS
    _dpsql_ksum(_dpsql_v(x, lower, upper), greatest(abs(CAST(lower AS DOUBLE)), abs(CAST(upper AS DOUBLE))));

CREATE OR REPLACE TEMP MACRO _dpsql_k_mom1(x, lower, upper) AS
    _dpsql_ksum(_dpsql_v(x, lower, upper) - _dpsql_c(lower, upper), _dpsql_h(lower, upper));

CREATE OR REPLACE TEMP MACRO _dpsql_k_mom2(x, lower, upper) AS
    _dpsql_ksum((_dpsql_v(x, lower, upper) - _dpsql_c(lower, upper))
                   * (_dpsql_v(x, lower, upper) - _dpsql_c(lower, upper)),
                _dpsql_h(lower, upper) * _dpsql_h(lower, upper));

-- Type errors (issue 14).  A dp_* function of a numeric value has a second, untyped overload (sql/macros.sql)
-- that DuckDB binds for a value of any non-numeric type; it calls this, which raises the guarded session's
-- DPSQL-E060 message naming the value (its text in the query) and its type, never a data value.  It is an
-- aggregate (any_value), so the query keeps its shape: the error fires as the query runs, for every group, and
-- for a query without GROUP BY also on an empty table (one group); a GROUP BY query over no rows has no group to
-- raise it for and returns no rows.  alias(any_value(x)) is the text any_value(<value>); typeof is the type.
CREATE OR REPLACE TEMP MACRO _dpsql_value_text(a) AS regexp_extract(alias(a), '^any_value\((.*)\)$', 1);

CREATE OR REPLACE TEMP MACRO _dpsql_not_numeric(fn, x) AS
    error('DPSQL-E060: ' || fn || ': its value must be numeric; ' || _dpsql_value_text(any_value(x)) || ' is '
          || typeof(any_value(x)) || ' (convert it, e.g. TRY_CAST(' || _dpsql_value_text(any_value(x))
          || ' AS DOUBLE), or count it with dp_count)');
