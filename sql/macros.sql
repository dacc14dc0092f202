-- dpsql: the dp_* macros that dpsql.install(con) creates.  GENERATED from dpsql/surface.py by
-- `python -m dpsql.macrogen` (tests/test_surface.py checks it is current): edit the surface, not this file.
-- Each dp_* aggregate is a macro over list(x) (or a native count) feeding one vectorised Arrow UDF, which
-- receives a whole chunk of groups at a time.  Parameters are named, with NULL meaning "not given"; the UDF
-- validates them and names the bad one.  The UDFs take the parameters in the order
-- p, epsilon, rho, delta, lower, upper, method, beta, level (the *_ci ones only: level).
-- Native route of method := 'clipped' with both bounds (sum, mean, var, stddev): see sql/native.sql.
-- dp_f_ci: dp_f's arguments plus level, STRUCT(value DOUBLE, lo DOUBLE, hi DOUBLE) from one release
-- (value has dp_f's law, same cost), list route only; counts pass DuckDB's count as n, the rest list(x):
-- _dpsql_agg_ci(agg, list, n, p, epsilon, rho, delta, lower, upper, method, beta, level).
-- Type errors (issue 14): a function of a numeric value has two overloads.  The first takes x DOUBLE, which
-- DuckDB matches by an implicit cast from every integer width, DECIMAL and FLOAT (and NULL); a value of any
-- other type (VARCHAR, BOOLEAN, DATE, a list, ...) binds to the second, untyped one, whose _dpsql_not_numeric
-- (sql/native.sql) raises "DPSQL-E060: dp_f: its value must be numeric; <value> is <TYPE> (...)", the guarded
-- session's message.  dp_count and dp_count_ci count a value of any type.
-- Macros are TEMP so that install works on read-only databases.

CREATE OR REPLACE TEMP MACRO dp_count(x, epsilon := NULL, method := NULL) AS
    _dpsql_count(count(x), epsilon, method);

CREATE OR REPLACE TEMP MACRO dp_count_star(epsilon := NULL, method := NULL) AS
    _dpsql_count(count(*), epsilon, method);

CREATE OR REPLACE TEMP MACRO dp_sum(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                    rho := NULL, delta := NULL, beta := NULL) AS
    CASE WHEN _dpsql_native(method, lower, upper)
    THEN _dpsql_fin('sum', _dpsql_n(x), _dpsql_k_sum(x, lower, upper), NULL, epsilon, rho, delta, lower, upper,
                    method, beta)
    ELSE _dpsql_agg('sum', list(x), NULL, epsilon, rho, delta, lower, upper, method, beta) END,
    (x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL) AS
    CAST(_dpsql_not_numeric('dp_sum', x) AS DOUBLE);

CREATE OR REPLACE TEMP MACRO dp_mean(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                     rho := NULL, delta := NULL, beta := NULL) AS
    CASE WHEN _dpsql_native(method, lower, upper)
    THEN _dpsql_fin('mean', _dpsql_n(x), _dpsql_k_mom1(x, lower, upper), NULL, epsilon, rho, delta, lower, upper,
                    method, beta)
    ELSE _dpsql_agg('mean', list(x), NULL, epsilon, rho, delta, lower, upper, method, beta) END,
    (x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL) AS
    CAST(_dpsql_not_numeric('dp_mean', x) AS DOUBLE);

CREATE OR REPLACE TEMP MACRO dp_avg(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                    rho := NULL, delta := NULL, beta := NULL) AS
    CASE WHEN _dpsql_native(method, lower, upper)
    THEN _dpsql_fin('mean', _dpsql_n(x), _dpsql_k_mom1(x, lower, upper), NULL, epsilon, rho, delta, lower, upper,
                    method, beta)
    ELSE _dpsql_agg('mean', list(x), NULL, epsilon, rho, delta, lower, upper, method, beta) END,
    (x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL) AS
    CAST(_dpsql_not_numeric('dp_avg', x) AS DOUBLE);

CREATE OR REPLACE TEMP MACRO dp_var(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                    rho := NULL, delta := NULL, beta := NULL) AS
    CASE WHEN _dpsql_native(method, lower, upper)
    THEN _dpsql_fin('var', _dpsql_n(x), _dpsql_k_mom1(x, lower, upper), _dpsql_k_mom2(x, lower, upper), epsilon,
                    rho, delta, lower, upper, method, beta)
    ELSE _dpsql_agg('var', list(x), NULL, epsilon, rho, delta, lower, upper, method, beta) END,
    (x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL) AS
    CAST(_dpsql_not_numeric('dp_var', x) AS DOUBLE);

CREATE OR REPLACE TEMP MACRO dp_stddev(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                       rho := NULL, delta := NULL, beta := NULL) AS
    CASE WHEN _dpsql_native(method, lower, upper)
    THEN _dpsql_fin('stddev', _dpsql_n(x), _dpsql_k_mom1(x, lower, upper), _dpsql_k_mom2(x, lower, upper), epsilon,
                    rho, delta, lower, upper, method, beta)
    ELSE _dpsql_agg('stddev', list(x), NULL, epsilon, rho, delta, lower, upper, method, beta) END,
    (x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL) AS
    CAST(_dpsql_not_numeric('dp_stddev', x) AS DOUBLE);

CREATE OR REPLACE TEMP MACRO dp_quantile(x DOUBLE, p, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                         rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_agg('quantile', list(x), p, epsilon, rho, delta, lower, upper, method, beta),
    (x, p, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL,
     beta := NULL) AS
    CAST(_dpsql_not_numeric('dp_quantile', x) AS DOUBLE);

CREATE OR REPLACE TEMP MACRO dp_median(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                       rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_agg('quantile', list(x), 0.5, epsilon, rho, delta, lower, upper, method, beta),
    (x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL) AS
    CAST(_dpsql_not_numeric('dp_median', x) AS DOUBLE);

CREATE OR REPLACE TEMP MACRO dp_iqr(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                    rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_agg('iqr', list(x), NULL, epsilon, rho, delta, lower, upper, method, beta),
    (x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL) AS
    CAST(_dpsql_not_numeric('dp_iqr', x) AS DOUBLE);

CREATE OR REPLACE TEMP MACRO dp_count_ci(x, epsilon := NULL, method := NULL, level := 0.95) AS
    _dpsql_agg_ci('count', NULL, count(x), NULL, epsilon, NULL, NULL, NULL, NULL, method, NULL, level);

CREATE OR REPLACE TEMP MACRO dp_count_star_ci(epsilon := NULL, method := NULL, level := 0.95) AS
    _dpsql_agg_ci('count', NULL, count(*), NULL, epsilon, NULL, NULL, NULL, NULL, method, NULL, level);

CREATE OR REPLACE TEMP MACRO dp_sum_ci(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                       rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('sum', list(x), NULL, NULL, epsilon, rho, delta, lower, upper, method, beta, level),
    (x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL,
     level := 0.95) AS
    CAST(_dpsql_not_numeric('dp_sum_ci', x) AS STRUCT(value DOUBLE, lo DOUBLE, hi DOUBLE));

CREATE OR REPLACE TEMP MACRO dp_mean_ci(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                        rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('mean', list(x), NULL, NULL, epsilon, rho, delta, lower, upper, method, beta, level),
    (x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL,
     level := 0.95) AS
    CAST(_dpsql_not_numeric('dp_mean_ci', x) AS STRUCT(value DOUBLE, lo DOUBLE, hi DOUBLE));

CREATE OR REPLACE TEMP MACRO dp_avg_ci(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                       rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('mean', list(x), NULL, NULL, epsilon, rho, delta, lower, upper, method, beta, level),
    (x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL,
     level := 0.95) AS
    CAST(_dpsql_not_numeric('dp_avg_ci', x) AS STRUCT(value DOUBLE, lo DOUBLE, hi DOUBLE));

CREATE OR REPLACE TEMP MACRO dp_var_ci(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                       rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('var', list(x), NULL, NULL, epsilon, rho, delta, lower, upper, method, beta, level),
    (x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL,
     level := 0.95) AS
    CAST(_dpsql_not_numeric('dp_var_ci', x) AS STRUCT(value DOUBLE, lo DOUBLE, hi DOUBLE));

CREATE OR REPLACE TEMP MACRO dp_stddev_ci(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                          rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('stddev', list(x), NULL, NULL, epsilon, rho, delta, lower, upper, method, beta, level),
    (x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL,
     level := 0.95) AS
    CAST(_dpsql_not_numeric('dp_stddev_ci', x) AS STRUCT(value DOUBLE, lo DOUBLE, hi DOUBLE));

CREATE OR REPLACE TEMP MACRO dp_quantile_ci(x DOUBLE, p, epsilon := NULL, lower := NULL, upper := NULL,
                                            method := NULL, rho := NULL, delta := NULL, beta := NULL,
                                            level := 0.95) AS
    _dpsql_agg_ci('quantile', list(x), NULL, p, epsilon, rho, delta, lower, upper, method, beta, level),
    (x, p, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL,
     level := 0.95) AS
    CAST(_dpsql_not_numeric('dp_quantile_ci', x) AS STRUCT(value DOUBLE, lo DOUBLE, hi DOUBLE));

CREATE OR REPLACE TEMP MACRO dp_median_ci(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                          rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('quantile', list(x), NULL, 0.5, epsilon, rho, delta, lower, upper, method, beta, level),
    (x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL,
     level := 0.95) AS
    CAST(_dpsql_not_numeric('dp_median_ci', x) AS STRUCT(value DOUBLE, lo DOUBLE, hi DOUBLE));

CREATE OR REPLACE TEMP MACRO dp_iqr_ci(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                       rho := NULL, delta := NULL, beta := NULL, level := 0.95) AS
    _dpsql_agg_ci('iqr', list(x), NULL, NULL, epsilon, rho, delta, lower, upper, method, beta, level),
    (x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL, rho := NULL, delta := NULL, beta := NULL,
     level := 0.95) AS
    CAST(_dpsql_not_numeric('dp_iqr_ci', x) AS STRUCT(value DOUBLE, lo DOUBLE, hi DOUBLE));
