-- dpsql: the SQL that dpsql.install(con) runs.  Each dp_* aggregate is a macro over list(x) (or a
-- native count) feeding one vectorised Arrow UDF, which receives a whole chunk of groups at a time.
-- Parameters are named, with NULL meaning "not given"; the UDF validates them and names the bad one.
-- Macros are TEMP so that install works on read-only databases.

CREATE OR REPLACE TEMP MACRO dp_count(x, epsilon := NULL, method := NULL) AS
    _dpsql_count(count(x), epsilon, method);

CREATE OR REPLACE TEMP MACRO dp_count_star(epsilon := NULL, method := NULL) AS
    _dpsql_count(count(*), epsilon, method);

CREATE OR REPLACE TEMP MACRO dp_sum(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                    rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_agg('sum', list(x), NULL, epsilon, rho, delta, lower, upper, method, beta);

CREATE OR REPLACE TEMP MACRO dp_mean(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                     rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_agg('mean', list(x), NULL, epsilon, rho, delta, lower, upper, method, beta);

CREATE OR REPLACE TEMP MACRO dp_avg(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                    rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_agg('mean', list(x), NULL, epsilon, rho, delta, lower, upper, method, beta);

CREATE OR REPLACE TEMP MACRO dp_var(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                    rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_agg('var', list(x), NULL, epsilon, rho, delta, lower, upper, method, beta);

CREATE OR REPLACE TEMP MACRO dp_stddev(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                       rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_agg('stddev', list(x), NULL, epsilon, rho, delta, lower, upper, method, beta);

CREATE OR REPLACE TEMP MACRO dp_quantile(x, p, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                         rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_agg('quantile', list(x), p, epsilon, rho, delta, lower, upper, method, beta);

CREATE OR REPLACE TEMP MACRO dp_median(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                       rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_agg('quantile', list(x), 0.5, epsilon, rho, delta, lower, upper, method, beta);

CREATE OR REPLACE TEMP MACRO dp_iqr(x, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
                                    rho := NULL, delta := NULL, beta := NULL) AS
    _dpsql_agg('iqr', list(x), NULL, epsilon, rho, delta, lower, upper, method, beta);
