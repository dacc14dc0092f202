-- dpsql: the SQL that dpsql.install(con) runs.  Each dp_* aggregate is a macro over list(x) (or a
-- native count) feeding one vectorised Arrow UDF, which receives a whole chunk of groups at a time.
-- Parameters are named, with NULL meaning "not given"; the UDF validates them and names the bad one.
-- Macros are TEMP so that install works on read-only databases.

CREATE OR REPLACE TEMP MACRO dp_count(x, epsilon := NULL, method := NULL) AS
    _dpsql_count(count(x), epsilon, method);

CREATE OR REPLACE TEMP MACRO dp_count_star(epsilon := NULL, method := NULL) AS
    _dpsql_count(count(*), epsilon, method);

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

CREATE OR REPLACE TEMP MACRO dp_sum(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                    rho := NULL, delta := NULL, beta := NULL) AS
    CASE WHEN _dpsql_native(method, lower, upper)
    THEN _dpsql_fin('sum', count(_dpsql_xn(x)),
                    _dpsql_ksum(_dpsql_v(x, lower, upper), greatest(abs(CAST(lower AS DOUBLE)), abs(CAST(upper AS DOUBLE)))),
                    NULL,
                    epsilon, rho, delta, lower, upper, method, beta)
    ELSE _dpsql_agg('sum', list(x), NULL, epsilon, rho, delta, lower, upper, method, beta) END;

-- the shared bodies of dp_mean/dp_avg and dp_var/dp_stddev: agg names the release ('mean'; 'var' or 'stddev')
CREATE OR REPLACE TEMP MACRO _dpsql_mean(agg, x, epsilon, lower, upper, method, rho, delta, beta) AS
    CASE WHEN _dpsql_native(method, lower, upper)
    THEN _dpsql_fin(agg, count(_dpsql_xn(x)),
                    _dpsql_ksum(_dpsql_v(x, lower, upper) - _dpsql_c(lower, upper), _dpsql_h(lower, upper)), NULL,
                    epsilon, rho, delta, lower, upper, method, beta)
    ELSE _dpsql_agg(agg, list(x), NULL, epsilon, rho, delta, lower, upper, method, beta) END;

CREATE OR REPLACE TEMP MACRO _dpsql_var(agg, x, epsilon, lower, upper, method, rho, delta, beta) AS
    CASE WHEN _dpsql_native(method, lower, upper)
    THEN _dpsql_fin(agg, count(_dpsql_xn(x)),
                    _dpsql_ksum(_dpsql_v(x, lower, upper) - _dpsql_c(lower, upper), _dpsql_h(lower, upper)),
                    _dpsql_ksum((_dpsql_v(x, lower, upper) - _dpsql_c(lower, upper))
                                   * (_dpsql_v(x, lower, upper) - _dpsql_c(lower, upper)),
                                _dpsql_h(lower, upper) * _dpsql_h(lower, upper)),
                    epsilon, rho, delta, lower, upper, method, beta)
    ELSE _dpsql_agg(agg, list(x), NULL, epsilon, rho, delta, lower, upper, method, beta) END;

CREATE OR REPLACE TEMP MACRO dp_mean(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                     rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_mean('mean', x, epsilon, lower, upper, method, rho, delta, beta);

CREATE OR REPLACE TEMP MACRO dp_avg(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                    rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_mean('mean', x, epsilon, lower, upper, method, rho, delta, beta);

CREATE OR REPLACE TEMP MACRO dp_var(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                    rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_var('var', x, epsilon, lower, upper, method, rho, delta, beta);

CREATE OR REPLACE TEMP MACRO dp_stddev(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                       rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_var('stddev', x, epsilon, lower, upper, method, rho, delta, beta);

CREATE OR REPLACE TEMP MACRO dp_quantile(x, p, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                         rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_agg('quantile', list(x), p, epsilon, rho, delta, lower, upper, method, beta);

CREATE OR REPLACE TEMP MACRO dp_median(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                       rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_agg('quantile', list(x), 0.5, epsilon, rho, delta, lower, upper, method, beta);

CREATE OR REPLACE TEMP MACRO dp_iqr(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                    rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_agg('iqr', list(x), NULL, epsilon, rho, delta, lower, upper, method, beta);

-- Error bars (issue 14): dp_f_ci takes dp_f's arguments plus level := 0.95 and returns
-- STRUCT(value DOUBLE, lo DOUBLE, hi DOUBLE) from one release (value has dp_f's law, same cost): the list
-- route only (no native clipped route); counts pass DuckDB's count as n, the rest pass list(x).
-- _dpsql_agg_ci(agg, list, n, p, epsilon, rho, delta, lower, upper, method, beta, level)
CREATE OR REPLACE TEMP MACRO dp_count_ci(x, epsilon := NULL, method := NULL, level := 0.95) AS
    _dpsql_agg_ci('count', NULL, count(x), NULL, epsilon, NULL, NULL, NULL, NULL, method, NULL, level);

CREATE OR REPLACE TEMP MACRO dp_count_star_ci(epsilon := NULL, method := NULL, level := 0.95) AS
    _dpsql_agg_ci('count', NULL, count(*), NULL, epsilon, NULL, NULL, NULL, NULL, method, NULL, level);

CREATE OR REPLACE TEMP MACRO dp_sum_ci(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                       rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('sum', list(x), NULL, NULL, epsilon, rho, delta, lower, upper, method, beta, level);

CREATE OR REPLACE TEMP MACRO dp_mean_ci(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                        rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('mean', list(x), NULL, NULL, epsilon, rho, delta, lower, upper, method, beta, level);

CREATE OR REPLACE TEMP MACRO dp_avg_ci(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                       rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('mean', list(x), NULL, NULL, epsilon, rho, delta, lower, upper, method, beta, level);

CREATE OR REPLACE TEMP MACRO dp_var_ci(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                       rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('var', list(x), NULL, NULL, epsilon, rho, delta, lower, upper, method, beta, level);

CREATE OR REPLACE TEMP MACRO dp_stddev_ci(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                          rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('stddev', list(x), NULL, NULL, epsilon, rho, delta, lower, upper, method, beta, level);

CREATE OR REPLACE TEMP MACRO dp_quantile_ci(x, p, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                            rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('quantile', list(x), NULL, p, epsilon, rho, delta, lower, upper, method, beta, level);

CREATE OR REPLACE TEMP MACRO dp_median_ci(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                          rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('quantile', list(x), NULL, 0.5, epsilon, rho, delta, lower, upper, method, beta, level);

CREATE OR REPLACE TEMP MACRO dp_iqr_ci(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                       rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('iqr', list(x), NULL, NULL, epsilon, rho, delta, lower, upper, method, beta, level);
