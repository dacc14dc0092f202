"""Hostile queries as data: ``(sql, expected DPSQL code)``, reusable by the session tests.

``HOSPITAL`` uses only the schema of ``tests/session/conftest.make_db`` (protected ``visits``, public
``clinics``, unregistered ``secrets``), so a guarded session on that database must refuse each query with
the same code, charge nothing and read nothing.  ``EXTENDED`` also needs the extra tables of
:func:`extended_catalog`; ``CAPPED`` needs a per-query cap of 1 (:func:`hospital_catalog` with ``cap=1``).
"""

from __future__ import annotations

from dpsql.guard.catalog import Catalog, TableInfo

VISITS = TableInfo("visits", "protected",
                   {"patient_id": "INTEGER", "clinic": "VARCHAR", "cost": "DOUBLE", "note": "VARCHAR"},
                   privacy_unit="patient_id", max_rows_per_unit=3, public_keys={"clinic": ("A", "B", "C")})
CLINICS = TableInfo("clinics", "public", {"clinic": "VARCHAR", "name": "VARCHAR"}, rows=3,
                    multiplicity={"clinic": 1, "name": 1})
DIAG = TableInfo("diag", "protected", {"patient_id": "INTEGER", "code": "VARCHAR"}, privacy_unit="patient_id",
                 max_rows_per_unit=2, max_groups_per_unit=2)
EVENTS = TableInfo("events", "protected", {"kind": "VARCHAR", "amount": "DOUBLE"},
                   public_keys={"kind": ("x", "y")})
ACCOUNTS = TableInfo("accounts", "protected", {"account_id": "INTEGER", "balance": "DOUBLE"},
                     privacy_unit="account_id")


def hospital_catalog(accounting: str = "pure", delta: float = 0.0, cap: float | None = None) -> Catalog:
    """The catalog a session builds for ``make_db``'s hospital database."""
    return Catalog({"visits": VISITS, "clinics": CLINICS}, accounting=accounting, delta=delta,
                   max_query_epsilon=cap)


def extended_catalog(accounting: str = "pure", delta: float = 0.0, cap: float | None = None) -> Catalog:
    """Hospital plus ``diag`` (same unit), ``events`` (row-level) and ``accounts`` (another unit)."""
    tables = {t.name: t for t in (VISITS, CLINICS, DIAG, EVENTS, ACCOUNTS)}
    return Catalog(tables, accounting=accounting, delta=delta, max_query_epsilon=cap)


C = "dp_count(*, epsilon := 1)"

HOSPITAL: list[tuple[str, str]] = [
    # E001: not one parseable DuckDB query
    ("SELEC 1", "DPSQL-E001"),
    ("SELECT FROM WHERE", "DPSQL-E001"),
    ("", "DPSQL-E001"),
    ("   ", "DPSQL-E001"),
    ("SELECT 'unterminated", "DPSQL-E001"),
    ("SELECT 1 +", "DPSQL-E001"),
    # E002: several statements (either parser)
    ("SELECT 1; SELECT 2", "DPSQL-E002"),
    (f"SELECT {C} FROM visits; DROP TABLE visits", "DPSQL-E002"),
    (f"SELECT {C} FROM visits; CREATE TEMP TABLE x AS SELECT * FROM visits", "DPSQL-E002"),
    ("SELECT 1; ATTACH 'x.db'", "DPSQL-E002"),
    (f"SELECT {C} FROM visits;;SELECT * FROM visits", "DPSQL-E002"),
    # E003: anything but a plain query
    ("CREATE TEMP TABLE t AS SELECT * FROM visits", "DPSQL-E003"),
    ("INSERT INTO visits VALUES (1, 'A', 1, 'x')", "DPSQL-E003"),
    ("UPDATE visits SET cost = 0", "DPSQL-E003"),
    ("DELETE FROM visits", "DPSQL-E003"),
    ("DROP TABLE visits", "DPSQL-E003"),
    ("SET threads = 1", "DPSQL-E003"),
    ("PRAGMA table_info('visits')", "DPSQL-E003"),
    ("CALL pragma_storage_info('visits')", "DPSQL-E003"),
    ("ATTACH 'other.duckdb' AS o", "DPSQL-E003"),
    ("DETACH data", "DPSQL-E003"),
    ("COPY visits TO 'out.csv'", "DPSQL-E003"),
    ("EXPORT DATABASE 'dir'", "DPSQL-E003"),
    ("INSTALL httpfs", "DPSQL-E003"),
    ("LOAD httpfs", "DPSQL-E003"),
    ("EXPLAIN SELECT * FROM visits", "DPSQL-E003"),
    ("EXPLAIN ANALYZE SELECT * FROM visits WHERE note = 'x'", "DPSQL-E003"),
    ("DESCRIBE visits", "DPSQL-E003"),
    ("SUMMARIZE visits", "DPSQL-E003"),
    ("SHOW TABLES", "DPSQL-E003"),
    ("PIVOT visits ON clinic USING sum(cost)", "DPSQL-E003"),
    ("CHECKPOINT", "DPSQL-E003"),
    ("USE memory", "DPSQL-E003"),
    ("CREATE MACRO f(x) AS x", "DPSQL-E003"),
    ("BEGIN TRANSACTION", "DPSQL-E003"),
    # E010: relations other than registered tables of main
    ("SELECT * FROM secrets", "DPSQL-E010"),
    (f"SELECT {C} FROM read_csv('/etc/passwd')", "DPSQL-E010"),
    ("SELECT * FROM duckdb_tables()", "DPSQL-E010"),
    ("SELECT * FROM pragma_storage_info('visits')", "DPSQL-E010"),
    ("SELECT * FROM information_schema.tables", "DPSQL-E010"),
    (f"SELECT {C} FROM dpsql.budgets", "DPSQL-E010"),
    ("SELECT * FROM 'data.csv'", "DPSQL-E010"),
    (f"SELECT {C} FROM memory.main.visits", "DPSQL-E010"),
    (f"SELECT {C} FROM system.main.visits", "DPSQL-E010"),
    ("SELECT * FROM duckdb_settings()", "DPSQL-E010"),
    (f"SELECT {C} FROM visits, unnest([1, 2])", "DPSQL-E010"),
    ("SELECT * FROM sqlite_master", "DPSQL-E010"),
    ("SELECT * FROM glob('*')", "DPSQL-E010"),
    (f"SELECT {C} FROM visits v JOIN secrets s ON true", "DPSQL-E010"),
    # E011: functions off the allow-list
    (f"SELECT {C} FROM visits WHERE random() < 0.5", "DPSQL-E011"),
    ("SELECT setseed(0.5)", "DPSQL-E011"),
    (f"SELECT {C} FROM visits WHERE error('hit') IS NULL", "DPSQL-E011"),
    ("SELECT getvariable('x')", "DPSQL-E011"),
    (f"SELECT {C} FROM visits WHERE repeat(note, 1000000) = ''", "DPSQL-E011"),
    ("SELECT dp_sum(length(read_text('x')), epsilon := 1) FROM visits", "DPSQL-E011"),
    ("SELECT current_setting('threads')", "DPSQL-E011"),
    (f"SELECT {C} FROM visits WHERE uuid() IS NULL", "DPSQL-E011"),
    ("SELECT dp_mean(cost, epsilon := 1) FROM visits WHERE now() > DATE '2020-01-01'", "DPSQL-E011"),
    (f"SELECT {C} FROM visits WHERE regexp_matches(note, '(a+)+$')", "DPSQL-E011"),
    ("SELECT dp_secret_impl(cost) FROM visits", "DPSQL-E011"),
    (f"SELECT {C} FROM visits WHERE hash(note) = 5", "DPSQL-E011"),
    ("SELECT list_value(cost) FROM visits", "DPSQL-E011"),
    (f"SELECT {C} FROM visits WHERE md5(note) = 'x'", "DPSQL-E011"),
    ("SELECT dp_count(*, epsilon := getvariable('e')) FROM visits", "DPSQL-E011"),
    # E012: syntax outside the allow-list
    ("SELECT main.sum(cost) FROM visits", "DPSQL-E012"),
    ("SELECT cost.sum() FROM visits", "DPSQL-E012"),
    ("SELECT #1 FROM visits", "DPSQL-E012"),
    ("SELECT COLUMNS(*) FROM visits", "DPSQL-E012"),
    ("SELECT dp_count(visits, epsilon := 1) FROM visits", "DPSQL-E012"),
    ("SELECT visits FROM visits", "DPSQL-E012"),
    (f"SELECT {C} FROM visits WHERE rowid < 10", "DPSQL-E012"),
    (f"SELECT {C} FROM visits WHERE _dpsql_rand() > 0", "DPSQL-E012"),
    ("SELECT count(*) FILTER (WHERE clinic = 'A') FROM clinics", "DPSQL-E012"),
    (f"SELECT {C} FROM visits v WHERE v.nosuch = 1", "DPSQL-E012"),
    ("SELECT dp_count(dp_count(*, epsilon := 1), epsilon := 1) FROM visits", "DPSQL-E012"),
    (f"SELECT {C} FROM visits AT (VERSION => 1)", "DPSQL-E012"),
    (f"SELECT {C} FROM visits WHERE {{'a': cost}}.a > 1", "DPSQL-E012"),
    ("SELECT dp_count(v.*, epsilon := 1) FROM visits v", "DPSQL-E012"),
    ("SELECT dp_count(*, epsilon := ?) FROM visits", "DPSQL-E012"),
    # E020: protected values reaching the output
    ("SELECT * FROM visits", "DPSQL-E020"),
    ("SELECT note FROM visits", "DPSQL-E020"),
    ("SELECT 1 FROM visits", "DPSQL-E020"),
    (f"SELECT note, {C} FROM visits GROUP BY clinic", "DPSQL-E020"),
    (f"SELECT cost + {C} FROM visits", "DPSQL-E020"),
    (f"SELECT *, {C} FROM visits", "DPSQL-E020"),
    ("WITH x AS (SELECT * FROM visits) SELECT * FROM x", "DPSQL-E020"),
    ("SELECT * FROM (SELECT note FROM visits) t", "DPSQL-E020"),
    ("SELECT patient_id FROM visits UNION ALL SELECT 1", "DPSQL-E020"),
    (f"SELECT clinic, {C} FROM visits GROUP BY clinic ORDER BY note", "DPSQL-E020"),
    ("SELECT v.* FROM visits v JOIN clinics c USING (clinic)", "DPSQL-E020"),
    ("SELECT c.name FROM visits v JOIN clinics c USING (clinic)", "DPSQL-E020"),
    ("SELECT note FROM visits WHERE note = 'CANARY_7731'", "DPSQL-E020"),
    # E021: non-DP aggregates over protected data
    ("SELECT count(*) FROM visits", "DPSQL-E021"),
    ("SELECT sum(cost) FROM visits", "DPSQL-E021"),
    ("SELECT clinic, avg(cost) FROM visits GROUP BY clinic", "DPSQL-E021"),
    (f"SELECT max(cost), {C} FROM visits", "DPSQL-E021"),
    ("SELECT min(note) FROM visits", "DPSQL-E021"),
    ("SELECT median(cost) FROM visits", "DPSQL-E021"),
    ("SELECT dp_sum(x, epsilon := 1) FROM (SELECT count(*) AS x FROM visits) t", "DPSQL-E021"),
    ("SELECT count(*) FROM visits v JOIN clinics c USING (clinic)", "DPSQL-E021"),
    ("SELECT dp_sum(cost - avg(cost), epsilon := 1) FROM visits", "DPSQL-E021"),
    ("SELECT stddev(cost) FROM visits WHERE clinic = 'A'", "DPSQL-E021"),
    # E022: HAVING on raw values
    (f"SELECT clinic, {C} FROM visits GROUP BY clinic HAVING count(*) > 5", "DPSQL-E022"),
    (f"SELECT clinic, {C} FROM visits GROUP BY clinic HAVING max(cost) > 50", "DPSQL-E022"),
    (f"SELECT clinic, {C} FROM visits GROUP BY clinic HAVING note = 'x'", "DPSQL-E022"),
    (f"SELECT {C} FROM visits HAVING sum(cost) > 0", "DPSQL-E022"),
    (f"SELECT clinic, {C} FROM visits GROUP BY clinic HAVING min(patient_id) = 7", "DPSQL-E022"),
    # E030: group keys not public
    (f"SELECT note, {C} FROM visits GROUP BY note", "DPSQL-E030"),
    (f"SELECT cost, {C} FROM visits GROUP BY cost", "DPSQL-E030"),
    (f"SELECT lower(clinic), {C} FROM visits GROUP BY lower(clinic)", "DPSQL-E030"),
    (f"SELECT clinic || note, {C} FROM visits GROUP BY 1", "DPSQL-E030"),
    (f"SELECT k, {C} FROM (SELECT clinic || 'x' AS k FROM visits) t GROUP BY k", "DPSQL-E030"),
    (f"SELECT clinic, note, {C} FROM visits GROUP BY ALL", "DPSQL-E030"),
    (f"SELECT cost > 50 AS hi, {C} FROM visits GROUP BY hi", "DPSQL-E030"),
    (f"SELECT clinic, {C} FROM visits GROUP BY clinic, note", "DPSQL-E030"),
    # E031: grouping constructs
    (f"SELECT clinic, {C} FROM visits GROUP BY ROLLUP (clinic)", "DPSQL-E031"),
    (f"SELECT clinic, {C} FROM visits GROUP BY CUBE (clinic)", "DPSQL-E031"),
    (f"SELECT clinic, {C} FROM visits GROUP BY GROUPING SETS ((clinic), ())", "DPSQL-E031"),
    ("SELECT * FROM visits PIVOT (sum(cost) FOR clinic IN ('A', 'B'))", "DPSQL-E031"),
    ("SELECT * FROM visits UNPIVOT (v FOR k IN (cost))", "DPSQL-E031"),
    # E032: grouping by the privacy unit
    (f"SELECT patient_id, {C} FROM visits GROUP BY patient_id", "DPSQL-E032"),
    (f"SELECT pid, {C} FROM (SELECT patient_id AS pid, cost FROM visits) t GROUP BY pid", "DPSQL-E032"),
    (f"SELECT patient_id % 10, {C} FROM visits GROUP BY 1", "DPSQL-E032"),
    # E040: joins that break the unit
    (f"SELECT {C} FROM visits a JOIN visits b ON a.clinic = b.clinic", "DPSQL-E040"),
    (f"SELECT {C} FROM visits a CROSS JOIN visits b", "DPSQL-E040"),
    (f"SELECT {C} FROM visits a, visits b WHERE a.patient_id = b.patient_id", "DPSQL-E040"),
    (f"SELECT {C} FROM visits a NATURAL JOIN visits b", "DPSQL-E040"),
    (f"SELECT {C} FROM visits a POSITIONAL JOIN visits b", "DPSQL-E040"),
    (f"SELECT {C} FROM visits a ASOF JOIN visits b ON a.patient_id = b.patient_id AND a.cost >= b.cost",
     "DPSQL-E040"),
    (f"SELECT {C} FROM visits a FULL JOIN visits b ON a.patient_id = b.patient_id", "DPSQL-E040"),
    (f"SELECT {C} FROM clinics c LEFT JOIN visits v ON c.clinic = v.clinic", "DPSQL-E040"),
    (f"SELECT {C} FROM visits v RIGHT JOIN clinics c ON c.clinic = v.clinic", "DPSQL-E040"),
    (f"SELECT {C} FROM visits v CROSS JOIN clinics c", "DPSQL-E040"),
    (f"SELECT {C} FROM visits a JOIN visits b ON a.patient_id < b.patient_id", "DPSQL-E040"),
    (f"SELECT {C} FROM visits a JOIN visits b ON a.patient_id = b.patient_id OR true", "DPSQL-E040"),
    (f"SELECT {C} FROM visits v SEMI JOIN visits w ON v.patient_id = w.patient_id", "DPSQL-E040"),
    (f"SELECT {C} FROM visits a, LATERAL (SELECT * FROM visits b WHERE b.patient_id = a.patient_id) c",
     "DPSQL-E040"),
    (f"SELECT {C} FROM visits a LEFT JOIN visits b ON a.patient_id = b.patient_id", "DPSQL-E040"),
    (f"SELECT {C} FROM visits v ANTI JOIN clinics c ON v.clinic = c.clinic", "DPSQL-E040"),
    (f"SELECT {C} FROM (visits a JOIN visits b ON a.clinic = b.clinic)", "DPSQL-E040"),
    (f"SELECT {C} FROM visits a JOIN (visits b JOIN visits c ON b.clinic = c.clinic) "
     "ON a.patient_id = b.patient_id", "DPSQL-E040"),
    (f"SELECT {C} FROM (visits a JOIN clinics c ON a.clinic = c.clinic)", "DPSQL-E040"),
    # E041: the unit derived, renamed into a look-alike, or aliased away
    (f"SELECT {C} FROM visits a JOIN (SELECT patient_id + 1 AS patient_id FROM visits) b "
     "ON a.patient_id = b.patient_id", "DPSQL-E041"),
    (f"SELECT {C} FROM visits a JOIN (SELECT cost AS patient_id FROM visits) b ON a.patient_id = b.patient_id",
     "DPSQL-E041"),
    (f"SELECT {C} FROM visits a JOIN visits b ON a.patient_id = b.cost", "DPSQL-E041"),
    (f"SELECT {C} FROM visits AS v(p, c, x, n)", "DPSQL-E041"),
    (f"SELECT {C} FROM (SELECT * FROM visits) AS v(a, b, c, d)", "DPSQL-E041"),
    # E050: cross-row operators in the private part
    ("SELECT dp_sum(c, epsilon := 1) FROM (SELECT cost, row_number() OVER (PARTITION BY patient_id) AS c "
     "FROM visits) t", "DPSQL-E050"),
    (f"SELECT {C} FROM (SELECT * FROM visits LIMIT 10) t", "DPSQL-E050"),
    (f"SELECT {C} FROM (SELECT * FROM visits ORDER BY cost) t", "DPSQL-E050"),
    (f"SELECT {C} FROM (SELECT DISTINCT patient_id FROM visits) t", "DPSQL-E050"),
    ("SELECT dp_count(DISTINCT patient_id) FROM visits", "DPSQL-E050"),
    (f"SELECT {C} FROM visits USING SAMPLE 10%", "DPSQL-E050"),
    (f"SELECT {C} FROM visits TABLESAMPLE 10%", "DPSQL-E050"),
    (f"SELECT {C} FROM (SELECT * FROM visits QUALIFY row_number() OVER () = 1) t", "DPSQL-E050"),
    ("WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
     "DPSQL-E050"),
    ("SELECT dp_count(*, epsilon := 1) OVER () FROM visits", "DPSQL-E050"),
    # issue 15, item 3: UNION ALL of same-unit branches, each selecting the unit in the same position
    (f"SELECT {C} FROM (SELECT patient_id, cost FROM visits UNION SELECT patient_id, cost FROM visits) t",
     "DPSQL-E050"),
    (f"SELECT {C} FROM (SELECT patient_id, cost FROM visits UNION ALL SELECT 1, 2.0 FROM clinics) t", "DPSQL-E050"),
    (f"SELECT {C} FROM (SELECT patient_id, cost FROM visits UNION ALL SELECT cost, patient_id FROM visits) t",
     "DPSQL-E050"),
    (f"SELECT {C} FROM (SELECT cost FROM visits UNION ALL SELECT cost FROM visits) t", "DPSQL-E050"),
    (f"SELECT {C} FROM (SELECT patient_id FROM visits UNION ALL BY NAME SELECT patient_id FROM visits) t",
     "DPSQL-E050"),
    (f"SELECT {C} FROM (SELECT patient_id FROM visits UNION ALL SELECT patient_id FROM visits LIMIT 5) t",
     "DPSQL-E050"),
    (f"SELECT {C} FROM (SELECT patient_id FROM visits EXCEPT ALL SELECT patient_id FROM visits) t", "DPSQL-E050"),
    ("SELECT note FROM visits UNION ALL SELECT note FROM visits", "DPSQL-E020"),
    (f"SELECT {C} FROM (SELECT * FROM visits OFFSET 5) t", "DPSQL-E050"),
    (f"SELECT {C} FROM (SELECT clinic FROM visits GROUP BY clinic) t", "DPSQL-E050"),
    (f"SELECT DISTINCT clinic, {C} FROM visits GROUP BY clinic", "DPSQL-E050"),
    ("SELECT dp_sum(row_number() OVER (ORDER BY cost), epsilon := 1) FROM visits", "DPSQL-E050"),
    ("SELECT dp_sum(lag(cost) OVER (ORDER BY cost), epsilon := 1) FROM visits", "DPSQL-E011"),
    (f"SELECT clinic, {C} FROM visits GROUP BY clinic QUALIFY rank() OVER (ORDER BY clinic) = 1", "DPSQL-E050"),
    (f"SELECT {C} FROM (SELECT * FROM visits INTERSECT SELECT * FROM visits) t", "DPSQL-E050"),
    # E051: subqueries reading protected data inside expressions
    (f"SELECT {C} FROM visits WHERE cost > (SELECT avg(cost) FROM visits)", "DPSQL-E051"),
    (f"SELECT {C} FROM visits WHERE patient_id IN (SELECT patient_id FROM visits WHERE note = 'x')",
     "DPSQL-E051"),
    ("SELECT (SELECT count(*) FROM visits)", "DPSQL-E051"),
    ("SELECT 1 WHERE EXISTS (SELECT 1 FROM visits WHERE note = 'CANARY_7731')", "DPSQL-E051"),
    ("SELECT name FROM clinics WHERE clinic IN (SELECT clinic FROM visits)", "DPSQL-E051"),
    ("SELECT (SELECT dp_count(*, epsilon := 1) FROM visits)", "DPSQL-E051"),
    # issue 15, item 1: a public uncorrelated [NOT] IN / [NOT] EXISTS in WHERE is allowed; nothing else
    (f"SELECT {C} FROM visits v WHERE EXISTS (SELECT 1 FROM clinics c WHERE c.clinic = v.clinic)", "DPSQL-E051"),
    (f"SELECT {C} FROM visits WHERE clinic IN (SELECT name FROM clinics WHERE name = note)", "DPSQL-E051"),
    (f"SELECT {C} FROM visits WHERE clinic NOT IN (SELECT c.clinic FROM clinics c JOIN visits w "
     "ON c.clinic = w.clinic)", "DPSQL-E051"),
    (f"SELECT {C} FROM visits WHERE clinic IN (SELECT clinic FROM (SELECT clinic, {C} AS n FROM visits "
     "GROUP BY clinic) t WHERE n > 10)", "DPSQL-E051"),
    ("SELECT dp_sum(cost, epsilon := 1) FILTER (WHERE clinic IN (SELECT clinic FROM clinics)) FROM visits",
     "DPSQL-E051"),
    (f"SELECT clinic, {C} FROM visits GROUP BY clinic HAVING clinic IN (SELECT clinic FROM clinics)", "DPSQL-E051"),
    (f"SELECT {C} FROM visits v JOIN clinics c ON c.clinic = v.clinic AND c.name IN (SELECT name FROM clinics)",
     "DPSQL-E051"),
    (f"SELECT {C} FROM visits WHERE cost > (SELECT count(*) FROM clinics)", "DPSQL-E051"),
    (f"SELECT {C} FROM visits WHERE NOT EXISTS (SELECT 1 FROM clinics WHERE EXISTS "
     "(SELECT 1 FROM visits WHERE note = 'CANARY_7731'))", "DPSQL-E051"),
    ("SELECT CASE WHEN (SELECT max(cost) FROM visits) > 90 THEN 1 END", "DPSQL-E051"),
    ("SELECT name FROM clinics c WHERE EXISTS (SELECT 1 FROM visits v WHERE v.clinic = c.clinic)", "DPSQL-E051"),
    # issue 15, item 2: key lists are literal, distinct, LEFT JOINed only as groups, never lists of units
    (f"SELECT k.c, {C} FROM (VALUES ('A'), ('A'), ('B')) k(c) LEFT JOIN visits v ON v.clinic = k.c GROUP BY k.c",
     "DPSQL-E043"),
    (f"SELECT k.c, {C} FROM visits v JOIN (VALUES ('A'), ('A')) k(c) ON v.clinic = k.c GROUP BY k.c", "DPSQL-E043"),
    (f"SELECT {C} FROM (VALUES ('A'), ('B')) k(c) LEFT JOIN visits v ON v.clinic = k.c", "DPSQL-E040"),
    (f"SELECT k.c, {C} FROM (VALUES ('A', 1), ('B', 2)) k(c, x) LEFT JOIN visits v ON v.clinic = k.c GROUP BY k.c",
     "DPSQL-E040"),
    (f"SELECT k.c, v.clinic, {C} FROM (VALUES ('A'), ('B')) k(c) LEFT JOIN visits v ON v.clinic = k.c "
     "GROUP BY k.c, v.clinic", "DPSQL-E040"),
    (f"SELECT k.c, {C} FROM (VALUES ('A'), ('B')) k(c) LEFT JOIN visits v ON v.note = k.c OR true GROUP BY k.c",
     "DPSQL-E040"),
    ("SELECT k.c FROM (VALUES ('CANARY_7731'), ('B')) k(c) LEFT JOIN visits v ON v.note = k.c "
     "WHERE v.patient_id IS NOT NULL", "DPSQL-E020"),
    (f"SELECT k.c, max(v.note), {C} FROM (VALUES ('A'), ('B')) k(c) LEFT JOIN visits v ON v.clinic = k.c "
     "GROUP BY k.c", "DPSQL-E021"),
    (f"SELECT k.c, {C} FROM (VALUES ('A'), ('B')) k(c) LEFT JOIN visits v ON v.clinic = k.c GROUP BY k.c "
     "HAVING max(v.note) > 'a'", "DPSQL-E022"),
    ("SELECT k.c, v.note FROM (VALUES ('A'), ('B')) k(c) JOIN visits v ON v.clinic = k.c", "DPSQL-E020"),
    (f"SELECT k.p, {C} FROM (VALUES (1000), (7)) k(p) LEFT JOIN visits v ON v.patient_id = k.p GROUP BY k.p",
     "DPSQL-E032"),
    (f"SELECT patient_id, {C} FROM visits JOIN (VALUES (1000)) k(patient_id) USING (patient_id) "
     "GROUP BY patient_id", "DPSQL-E032"),
    (f"SELECT k.c, {C} FROM (VALUES ((SELECT max(note) FROM visits))) k(c) LEFT JOIN visits v ON v.note = k.c "
     "GROUP BY k.c", "DPSQL-E010"),
    (f"SELECT k.c, {C} FROM (VALUES (lower('A'))) k(c) JOIN visits v ON v.clinic = k.c GROUP BY k.c", "DPSQL-E010"),
    # issue 15, item 4: per-unit pre-aggregation GROUP BY exactly the unit; its rows leave only through dp_*
    ("SELECT patient_id, sum(cost) AS total FROM visits GROUP BY patient_id", "DPSQL-E020"),
    ("SELECT patient_id FROM visits GROUP BY patient_id HAVING max(cost) > 90", "DPSQL-E020"),
    ("SELECT * FROM (SELECT patient_id, sum(cost) AS total FROM visits GROUP BY patient_id) t WHERE total > 100",
     "DPSQL-E020"),
    ("WITH u AS (SELECT patient_id, max(cost) AS m FROM visits GROUP BY patient_id) SELECT m FROM u "
     "ORDER BY m DESC LIMIT 1", "DPSQL-E020"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, note AS t FROM visits GROUP BY patient_id)",
     "DPSQL-E020"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT *, sum(cost) AS t FROM visits GROUP BY patient_id)", "DPSQL-E020"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT clinic, sum(cost) AS t FROM visits GROUP BY clinic)", "DPSQL-E021"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT sum(cost) AS t FROM visits) q", "DPSQL-E021"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, clinic, sum(cost) AS t FROM visits "
     "GROUP BY patient_id, clinic)", "DPSQL-E021"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id % 10 AS b, sum(cost) AS t FROM visits GROUP BY 1)",
     "DPSQL-E021"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT pid, sum(cost) AS t FROM (SELECT patient_id + 0 AS pid, cost "
     "FROM visits) GROUP BY pid)", "DPSQL-E021"),
    ("SELECT dp_mean(m, epsilon := 1) FROM (SELECT max(t) AS m FROM (SELECT patient_id, sum(cost) AS t FROM visits "
     "GROUP BY patient_id))", "DPSQL-E021"),
    ("SELECT dp_mean(n, epsilon := 1) FROM (SELECT home, count(*) AS n FROM (SELECT patient_id, max(clinic) AS home "
     "FROM visits GROUP BY patient_id) GROUP BY home)", "DPSQL-E021"),
    ("SELECT count(*) FROM (SELECT patient_id, sum(cost) AS t FROM visits GROUP BY patient_id)", "DPSQL-E021"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, stddev(cost) AS t FROM visits GROUP BY patient_id)",
     "DPSQL-E021"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, median(cost) AS t FROM visits GROUP BY patient_id)",
     "DPSQL-E021"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, sum(cost) AS t FROM visits GROUP BY patient_id "
     "HAVING max(note) = 'x' OR clinic = 'A')", "DPSQL-E022"),
    (f"SELECT patient_id, {C} FROM (SELECT patient_id, sum(cost) AS t FROM visits GROUP BY patient_id) "
     "GROUP BY patient_id", "DPSQL-E032"),
    ("SELECT dp_sum(n, epsilon := 1) FROM (SELECT p, count(*) AS n FROM (VALUES (1), (2)) k(p) JOIN visits v "
     "ON v.patient_id = k.p GROUP BY p)", "DPSQL-E021"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, sum(cost) OVER (PARTITION BY patient_id) AS t "
     "FROM visits)", "DPSQL-E050"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, rank() OVER (ORDER BY sum(cost)) AS t FROM visits "
     "GROUP BY patient_id)", "DPSQL-E050"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, sum(cost) AS t FROM visits GROUP BY patient_id "
     "ORDER BY t DESC LIMIT 10)", "DPSQL-E050"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, sum(cost) AS t FROM visits GROUP BY patient_id "
     "LIMIT 5)", "DPSQL-E050"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, sum(cost) AS t FROM (SELECT * FROM visits "
     "ORDER BY cost DESC LIMIT 50) GROUP BY patient_id)", "DPSQL-E050"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, sum(cost) AS t FROM visits GROUP BY patient_id "
     "QUALIFY t > 1)", "DPSQL-E050"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT DISTINCT patient_id, sum(cost) AS t FROM visits "
     "GROUP BY patient_id)", "DPSQL-E050"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, sum(cost) AS t FROM visits GROUP BY patient_id "
     "UNION ALL SELECT 1, 2.0)", "DPSQL-E050"),
    (f"SELECT {C} FROM visits WHERE cost > (SELECT max(t) FROM (SELECT patient_id, sum(cost) AS t FROM visits "
     "GROUP BY patient_id))", "DPSQL-E051"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, sum(cost) AS t FROM visits GROUP BY patient_id "
     "HAVING sum(cost) > (SELECT 1))", "DPSQL-E051"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, sum(cost) FILTER (WHERE clinic = 'A') AS t "
     "FROM visits GROUP BY patient_id)", "DPSQL-E012"),
    # E060: invalid privacy parameters
    ("SELECT dp_count(*, epsilon := -1) FROM visits", "DPSQL-E060"),
    ("SELECT dp_count(*, epsilon := 0) FROM visits", "DPSQL-E060"),
    ("SELECT dp_count(*, epsilon := 'inf'::DOUBLE) FROM visits", "DPSQL-E060"),
    ("SELECT dp_count(*, epsilon := (SELECT 1)) FROM visits", "DPSQL-E060"),
    ("SELECT dp_count(*, epsilon := (SELECT max(cost) FROM visits)) FROM visits", "DPSQL-E060"),
    ("SELECT dp_count(*, epsilon := cost) FROM visits", "DPSQL-E060"),
    ("SELECT dp_count(*, epsilon := 1e400) FROM visits", "DPSQL-E060"),
    ("SELECT dp_count(*) FROM visits", "DPSQL-E060"),
    ("SELECT dp_mean(cost, epsilon := 1, lower := 10, upper := 1) FROM visits", "DPSQL-E060"),
    ("SELECT dp_quantile(cost, 1.5, epsilon := 1) FROM visits", "DPSQL-E060"),
    ("SELECT dp_quantile(cost, cost, epsilon := 1) FROM visits", "DPSQL-E060"),
    ("SELECT dp_mean(cost, epsilon := 1, method := 'nosuch') FROM visits", "DPSQL-E060"),
    ("SELECT dp_mean(cost, epsilon := 1, foo := 2) FROM visits", "DPSQL-E060"),
    ("SELECT dp_mean(cost, epsilon := 1, epsilon := 2) FROM visits", "DPSQL-E060"),
    ("SELECT dp_mean(cost, epsilon := 1, rho := 0.1) FROM visits", "DPSQL-E060"),
    ("SELECT dp_mean(cost, epsilon := 5000) FROM visits", "DPSQL-E060"),
    ("SELECT dp_mean(cost, cost, epsilon := 1) FROM visits", "DPSQL-E060"),
    ("SELECT dp_mean(cost, epsilon := 1, method := cost) FROM visits", "DPSQL-E060"),
    ("SELECT dp_mean(cost, epsilon := 1, delta := 2) FROM visits", "DPSQL-E060"),
    ("SELECT dp_count(*, epsilon := NULL) FROM visits", "DPSQL-E060"),
    ("SELECT dp_count(*, epsilon := 1 + 1) FROM visits", "DPSQL-E060"),
    ("SELECT dp_mean(cost, epsilon := 1, lower := 'nan'::DOUBLE, upper := 1) FROM visits", "DPSQL-E060"),
    ("SELECT dp_mean(cost, epsilon := 1, method := 'shifted_cm_gauss', delta := 1e-6) FROM visits", "DPSQL-E060"),
    ("SELECT dp_mean(*, epsilon := 1) FROM visits", "DPSQL-E060"),
    ("SELECT dp_quantile(cost, epsilon := 1) FROM visits", "DPSQL-E060"),
    ("SELECT dp_count(cost, epsilon := 1, lower := 0) FROM visits", "DPSQL-E060"),
    ("SELECT dp_count_star(cost, epsilon := 1) FROM visits", "DPSQL-E060"),
    ("SELECT dp_count(epsilon := 1) FROM visits", "DPSQL-E060"),
    # the error-bar twins (issue 14): level is a numeric literal in [0.5, 0.999], only on dp_*_ci
    ("SELECT dp_mean_ci(cost, epsilon := 1, level := cost) FROM visits", "DPSQL-E060"),
    ("SELECT clinic, dp_count_ci(*, epsilon := 1, level := (SELECT max(cost) / 100 FROM visits)) FROM visits "
     "GROUP BY clinic", "DPSQL-E060"),
    ("SELECT dp_median_ci(cost, epsilon := 1, level := 'high') FROM visits", "DPSQL-E060"),
    ("SELECT dp_count_star_ci(epsilon := 1, level := 1.5) FROM visits", "DPSQL-E060"),
    ("SELECT dp_sum_ci(cost, epsilon := 1, level := 0.4) FROM visits", "DPSQL-E060"),
    ("SELECT dp_quantile_ci(cost, 0.5, epsilon := 1, level := NULL) FROM visits", "DPSQL-E060"),
    ("SELECT dp_mean(cost, epsilon := 1, level := 0.9) FROM visits", "DPSQL-E060"),
    ("SELECT dp_iqr_ci(cost, level := 0.9) FROM visits", "DPSQL-E060"),
    ("SELECT dp_count_star_ci(cost, epsilon := 1) FROM visits", "DPSQL-E060"),
    # issue 19: not zero-row probes (the emptiness is not in the text, or not at the outermost level) ...
    ("SELECT * FROM visits WHERE cost < 0", "DPSQL-E020"),
    ("SELECT * FROM visits WHERE 1 = 0 OR cost > 100", "DPSQL-E020"),
    ("SELECT * FROM visits WHERE cost <> cost", "DPSQL-E020"),
    ("SELECT note FROM visits WHERE 'a' = 'b' OR note = 'CANARY_7731'", "DPSQL-E020"),
    # raw rows with a LIMIT at the outermost level: E020 (the rows), not E050 (the LIMIT BI tools append)
    ("SELECT * FROM visits WHERE NULL LIMIT 1", "DPSQL-E020"),
    ("SELECT * FROM (SELECT * FROM visits LIMIT 0) AS q", "DPSQL-E050"),
    ("SELECT note FROM visits LIMIT 0 + 0", "DPSQL-E020"),
    ("SELECT note FROM visits LIMIT (SELECT 0)", "DPSQL-E051"),
    ("SELECT count(*) FROM visits WHERE 1 = 0", "DPSQL-E021"),
    ("SELECT sum(cost) FROM visits WHERE false GROUP BY ALL", "DPSQL-E021"),
    ("SELECT note FROM visits WHERE 1 = 0 UNION ALL SELECT note FROM visits", "DPSQL-E020"),
    # ... and probes still name only what a session may name
    ("SELECT * FROM secrets LIMIT 0", "DPSQL-E010"),
    ("SELECT * FROM secrets WHERE 1 = 0", "DPSQL-E010"),
    ("SELECT * FROM read_csv('/etc/passwd') LIMIT 0", "DPSQL-E010"),
    ("SELECT * FROM (SELECT * FROM duckdb_settings()) AS q WHERE false", "DPSQL-E010"),
    ("SELECT getenv('HOME') FROM visits LIMIT 0", "DPSQL-E011"),
    ("SELECT * FROM visits v, (SELECT * FROM data.main.visits) w LIMIT 0", "DPSQL-E010"),
    # issue 19: not pick-lists of declared public keys
    ("SELECT DISTINCT note FROM visits", "DPSQL-E050"),
    ("SELECT DISTINCT patient_id FROM visits", "DPSQL-E050"),
    ("SELECT DISTINCT clinic, note FROM visits", "DPSQL-E050"),
    ("SELECT DISTINCT clinic FROM visits WHERE cost > 50", "DPSQL-E050"),
    ("SELECT DISTINCT clinic FROM visits WHERE note = 'CANARY_7731'", "DPSQL-E050"),
    ("SELECT clinic FROM visits WHERE patient_id = 1000 GROUP BY clinic", "DPSQL-E050"),
    ("SELECT DISTINCT clinic FROM visits ORDER BY cost", "DPSQL-E050"),
    ("SELECT clinic FROM visits GROUP BY clinic, note", "DPSQL-E050"),
    ("SELECT DISTINCT upper(clinic) FROM visits", "DPSQL-E050"),
    ("SELECT DISTINCT ON (clinic) clinic FROM visits", "DPSQL-E050"),
    ("SELECT DISTINCT * FROM visits", "DPSQL-E050"),
    ("SELECT DISTINCT clinic FROM visits AS v(clinic, a, b, c)", "DPSQL-E041"),
    ("SELECT DISTINCT v.clinic FROM visits v JOIN clinics c ON v.clinic = c.clinic", "DPSQL-E050"),
    ("WITH x AS (SELECT * FROM visits WHERE cost > 50) SELECT DISTINCT clinic FROM x", "DPSQL-E050"),
    ("SELECT DISTINCT clinic FROM visits WHERE clinic IN (SELECT clinic FROM visits WHERE note = 'x')",
     "DPSQL-E051"),
    ("SELECT clinic FROM visits GROUP BY clinic HAVING count(*) > 1", "DPSQL-E022"),
    ("SELECT clinic FROM visits", "DPSQL-E020"),
    # issue 19: plain aggregates without the data owner's opt-in (the message names the dp_* form)
    ("SELECT avg(cost) FROM visits", "DPSQL-E021"),
    ("SELECT clinic, COUNT(*) AS count FROM visits GROUP BY clinic ORDER BY count DESC LIMIT 100", "DPSQL-E021"),
]

EXTENDED: list[tuple[str, str]] = [
    (f"SELECT {C} FROM visits v JOIN accounts a ON v.patient_id = a.account_id", "DPSQL-E042"),
    (f"SELECT {C} FROM visits UNION ALL SELECT {C} FROM accounts", "DPSQL-E042"),
    (f"SELECT {C} FROM events e JOIN visits v ON true", "DPSQL-E042"),
    (f"SELECT {C} FROM events a JOIN events b ON a.kind = b.kind", "DPSQL-E040"),
    (f"SELECT {C} FROM (SELECT patient_id, cost FROM visits UNION ALL SELECT account_id, balance FROM accounts) t",
     "DPSQL-E042"),
    (f"SELECT {C} FROM (SELECT * FROM events UNION ALL SELECT * FROM events) t", "DPSQL-E050"),
    # issue 15, item 4: per-unit aggregates that read another unit's table, join off the unit, or peek in a
    # subquery; a row-level table has no unit column to group by
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT v.patient_id, sum(a.balance) AS t FROM visits v "
     "JOIN accounts a ON v.patient_id = a.account_id GROUP BY v.patient_id)", "DPSQL-E042"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT v.patient_id, count(*) AS t FROM visits v JOIN diag d "
     "ON v.clinic = d.code GROUP BY v.patient_id)", "DPSQL-E040"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, sum(cost) AS t FROM visits v WHERE EXISTS "
     "(SELECT 1 FROM diag d WHERE d.patient_id = v.patient_id) GROUP BY patient_id)", "DPSQL-E051"),
    ("SELECT dp_mean(t, epsilon := 1) FROM (SELECT kind, sum(amount) AS t FROM events GROUP BY kind)", "DPSQL-E021"),
    (f"SELECT {C} FROM visits v JOIN diag d ON v.clinic = d.code", "DPSQL-E040"),
    (f"SELECT code, {C} FROM visits v JOIN diag d USING (patient_id) GROUP BY code", "DPSQL-E030"),
    (f"SELECT {C} FROM diag d JOIN (SELECT patient_id * 2 AS patient_id FROM visits) v USING (patient_id)",
     "DPSQL-E040"),
    ("SELECT kind, count(*) FROM events GROUP BY kind", "DPSQL-E021"),
    ("SELECT * FROM events", "DPSQL-E020"),
]

#: with ``hospital_catalog(cap=1)``: visits has max_rows_per_unit=3, so eps 1 costs 3
CAPPED: list[tuple[str, str]] = [
    (f"SELECT {C} FROM visits", "DPSQL-E061"),
    ("SELECT dp_count(*, epsilon := 0.2), dp_sum(cost, epsilon := 0.2) FROM visits", "DPSQL-E061"),
    ("SELECT clinic, dp_mean(cost, epsilon := 0.4) FROM visits GROUP BY clinic", "DPSQL-E061"),
]

HOSTILE: list[tuple[str, str]] = HOSPITAL + EXTENDED

#: allowed on the hospital catalog: (sql, exact pure-eps cost); visits has k = 3 rows, g = 1 group per unit
ALLOWED: list[tuple[str, str]] = [
    ("SELECT dp_count(*, epsilon := 0.1) AS n FROM visits", "0.3"),
    ("SELECT clinic, dp_mean(cost, epsilon := 0.5) FROM visits GROUP BY clinic", "1.5"),
    ("SELECT clinic, dp_count(*, epsilon := 0.25) AS n, dp_sum(cost, epsilon := 0.25) FROM visits "
     "GROUP BY clinic ORDER BY n DESC LIMIT 2", "1.5"),
    ("SELECT c.name, dp_count(*, epsilon := 0.1) FROM visits v JOIN clinics c ON v.clinic = c.clinic "
     "GROUP BY c.name", "0.3"),
    ("SELECT dp_sum(cost, epsilon := 0.1) FILTER (WHERE clinic = 'A') FROM visits", "0.3"),
    ("WITH x AS (SELECT patient_id AS p, cost * 2 AS c2 FROM visits WHERE cost / 0 > 1) "
     "SELECT dp_mean(c2, epsilon := 0.2) FROM x", "0.6"),
    ("SELECT dp_median(cost, epsilon := 0.1), dp_quantile(cost, 0.9, epsilon := 0.1), "
     "dp_iqr(cost, epsilon := 0.1) FROM visits", "0.9"),
    ("SELECT dp_var(cost, epsilon := 0.1), dp_stddev(cost, epsilon := 0.1) FROM visits WHERE clinic <> 'C'",
     "0.6"),
    ("SELECT * FROM (SELECT clinic, dp_count(*, epsilon := 0.1) AS n FROM visits GROUP BY ALL) WHERE n > 3",
     "0.3"),
    ("SELECT dp_count(*, epsilon := 0.1) FROM visits a JOIN visits b ON a.patient_id = b.patient_id", "0.3"),
    ("SELECT dp_count(*, epsilon := 0.1) FROM visits a JOIN (SELECT patient_id AS pid FROM visits) b "
     "ON a.patient_id = b.pid", "0.3"),
    ("SELECT dp_sum(TRY_CAST(note AS INTEGER), epsilon := 0.1) FROM visits", "0.3"),
    ("SELECT dp_sum(cost::INTEGER, epsilon := 0.1) FROM visits", "0.3"),
    ("SELECT clinic, dp_count(*, epsilon := 0.1) n FROM visits GROUP BY clinic HAVING n > 1", "0.3"),
    ("SELECT dp_count(*, epsilon := 0.1) / 2 AS half FROM visits", "0.3"),
    ("SELECT name FROM clinics ORDER BY name LIMIT 2", "0"),
    ("SELECT count(*) FROM clinics", "0"),
    # issue 15, item 5: integer division is total under TRY (a zero divisor drops the row, never raises)
    ("SELECT dp_count(*, epsilon := 0.1) FROM visits WHERE cost // 0 = 1", "0.3"),
    ("SELECT dp_sum(cost // 7, epsilon := 0.1) FROM visits", "0.3"),
    ("SELECT dp_count(*, epsilon := 0.1) FROM visits UNION ALL SELECT dp_count(*, epsilon := 0.2) FROM visits",
     "0.9"),
    ("SELECT dp_count(*, epsilon := 0.1) FROM visits v LEFT JOIN clinics c ON v.clinic = c.clinic "
     "WHERE c.name IS NULL", "0.3"),
    ("SELECT dp_count(*, epsilon := 0.1) FROM main.visits", "0.3"),
    ("SELECT clinic, dp_count_star(epsilon := 0.1), dp_avg(cost, epsilon := 0.1) FROM visits GROUP BY clinic",
     "0.6"),
    ("SELECT dp_count_star(epsilon := 0.1) FILTER (WHERE cost > 5) AS n FROM visits", "0.3"),
    ("SELECT dp_count(*, epsilon := 0.1) AS n FROM clinics", "0.1"),
    ("SELECT clinic, dp_count(*, epsilon := 0.2) AS n, dp_mean(cost, epsilon := 0.3) AS avg_cost "
     "FROM visits v JOIN clinics c USING (clinic) WHERE cost > 0 GROUP BY clinic "
     "HAVING n > 10 ORDER BY avg_cost DESC LIMIT 5", "1.5"),  # the example in docs/operations.md
    # the error-bar twins cost exactly what the plain calls cost, whatever the level
    ("SELECT clinic, dp_mean_ci(cost, epsilon := 0.5) AS m FROM visits GROUP BY clinic", "1.5"),
    ("SELECT dp_count_ci(*, epsilon := 0.1, level := 0.9) AS n, dp_count_ci(note, epsilon := 0.1, level := 0.999) "
     "FROM visits", "0.6"),
    ("SELECT clinic, dp_count_star_ci(epsilon := 0.1) FILTER (WHERE cost > 5) AS n, "
     "dp_sum_ci(cost, epsilon := 0.1, level := 0.5) FILTER (WHERE cost < 90) FROM visits GROUP BY clinic", "0.6"),
    ("SELECT dp_median_ci(cost, epsilon := 0.1, level := 0.99), dp_quantile_ci(cost, 0.9, epsilon := 0.1), "
     "dp_iqr_ci(cost, epsilon := 0.1), dp_avg_ci(cost, epsilon := 0.1) FROM visits", "1.2"),
    ("SELECT * FROM (SELECT clinic, dp_count_ci(*, epsilon := 0.1) AS r FROM visits GROUP BY ALL) ORDER BY clinic",
     "0.3"),
    ("SELECT r.value, r.hi - r.lo AS width FROM (SELECT dp_count_ci(*, epsilon := 0.1) AS r FROM visits)", "0.3"),
    # issue 15, item 2: analyst-supplied key lists; every listed key is released, empty ones too (cost unchanged)
    ("SELECT k.c, dp_count(*, epsilon := 0.1) AS n FROM (VALUES ('A'), ('Z')) k(c) LEFT JOIN visits v "
     "ON v.clinic = k.c GROUP BY k.c", "0.3"),
    ("SELECT k.n, dp_sum(v.cost, epsilon := 0.1) FROM (VALUES ('n1'), ('n4'), ('nope')) AS k(n) "
     "LEFT JOIN visits AS v ON v.note = k.n GROUP BY ALL ORDER BY k.n", "0.3"),
    ("SELECT c, dp_mean(cost, epsilon := 0.1) FROM visits v JOIN (VALUES ('A'), ('Q')) k(c) ON v.clinic = k.c "
     "GROUP BY c", "0.3"),
    # issue 15, item 3: UNION ALL of one unit's tables; bounded per unit after the union (k = 3 for visits)
    ("SELECT dp_count(*, epsilon := 0.1) FROM (SELECT * FROM visits UNION ALL SELECT * FROM visits) t", "0.3"),
    ("SELECT dp_sum(cost, epsilon := 0.1) FROM (SELECT patient_id, cost FROM visits WHERE clinic = 'A' "
     "UNION ALL SELECT patient_id AS p, cost * 2 FROM visits WHERE clinic = 'B')", "0.3"),
    ("SELECT clinic, dp_mean(cost, epsilon := 0.1) FROM (SELECT patient_id, clinic, cost FROM visits UNION ALL "
     "SELECT patient_id, clinic, cost FROM visits UNION ALL SELECT patient_id, clinic, 0 FROM visits) u "
     "GROUP BY clinic", "0.3"),
    # issue 15, item 4: per-unit pre-aggregation, one row per unit: multiplier 1 (not k = 3)
    ("SELECT dp_mean(total, epsilon := 0.1, lower := 0, upper := 100000) FROM (SELECT patient_id, sum(cost) AS total "
     "FROM visits GROUP BY patient_id)", "0.1"),
    ("SELECT dp_mean(cost, epsilon := 1) FROM (SELECT patient_id, sum(cost) AS cost FROM visits "
     "GROUP BY patient_id) t", "1"),
    ("SELECT dp_mean(n, epsilon := 0.1) AS visits_per_patient FROM (SELECT patient_id, count(*) AS n FROM visits "
     "GROUP BY patient_id)", "0.1"),
    ("SELECT dp_median(a, epsilon := 0.1) FROM (SELECT patient_id AS p, avg(cost) AS a FROM visits GROUP BY p)", "0.1"),
    ("SELECT dp_sum(t.spread, epsilon := 0.1) FROM (SELECT patient_id, max(cost) - min(cost) AS spread FROM visits "
     "WHERE clinic <> 'C' GROUP BY 1) t", "0.1"),
    ("SELECT dp_count(*, epsilon := 0.1) FROM (SELECT patient_id FROM visits GROUP BY patient_id "
     "HAVING max(cost) > 90)", "0.1"),
    ("SELECT dp_count(*, epsilon := 0.1) FROM (SELECT patient_id, sum(cost) AS total FROM visits "
     "GROUP BY patient_id HAVING total > 150 AND min(cost) / 0 IS NULL)", "0.1"),
    ("SELECT dp_count(*, epsilon := 0.1) AS big FROM (SELECT patient_id, sum(cost) AS total FROM visits "
     "GROUP BY patient_id) WHERE total > 150", "0.1"),
    ("SELECT home, dp_count(*, epsilon := 0.1) AS patients FROM (SELECT patient_id, max(clinic) AS home FROM visits "
     "GROUP BY patient_id) GROUP BY home ORDER BY home", "0.1"),
    ("SELECT dp_sum(n, epsilon := 0.1) FROM (SELECT patient_id, count(DISTINCT clinic) AS n FROM visits GROUP BY ALL)",
     "0.1"),
    ("SELECT dp_sum(total, epsilon := 0.1) FROM (SELECT sum(cost) AS total FROM visits GROUP BY patient_id)", "0.1"),
    ("WITH u AS (SELECT patient_id, sum(cost) AS total FROM visits GROUP BY patient_id) "
     "SELECT dp_sum(total, epsilon := 0.1) AS s, dp_count(*, epsilon := 0.1) AS n FROM u", "0.2"),
    ("SELECT dp_sum(v.cost / t.total, epsilon := 0.1) FROM (SELECT patient_id, sum(cost) AS total FROM visits "
     "GROUP BY patient_id) t JOIN visits v ON t.patient_id = v.patient_id", "0.3"),
    ("SELECT dp_mean(n, epsilon := 0.1) FROM (SELECT v.patient_id, count(*) AS n FROM visits v JOIN clinics c "
     "ON v.clinic = c.clinic WHERE c.name <> 'East' AND v.clinic IN (SELECT clinic FROM clinics) "
     "GROUP BY v.patient_id)", "0.1"),
    ("SELECT dp_sum(x, epsilon := 0.1) FROM (SELECT patient_id, count(*) AS x FROM (SELECT patient_id, "
     "sum(cost) AS t FROM visits GROUP BY patient_id) GROUP BY patient_id)", "0.1"),
    # issue 15, item 1: filters through public tables are per-row predicates (cost unchanged)
    ("SELECT dp_count(*, epsilon := 0.1) FROM visits WHERE clinic IN (SELECT clinic FROM clinics)", "0.3"),
    ("SELECT clinic, dp_sum(cost, epsilon := 0.1) AS s FROM visits "
     "WHERE clinic NOT IN (SELECT clinic FROM clinics WHERE name = 'North') GROUP BY clinic", "0.3"),
    ("SELECT dp_mean(cost, epsilon := 0.1) FROM visits WHERE cost / 0 > 1 OR EXISTS "
     "(SELECT 1 FROM clinics c WHERE c.name = 'South') AND NOT (clinic IN (SELECT clinic FROM clinics "
     "WHERE name <> 'East'))", "0.3"),
]

#: zero-row probes (issue 19), answered from the schema on ``hospital_catalog(cap=1)``: ``schema_only``,
#: cost 0, whatever the inner query (accepted, refused by the privacy checks, or over the per-query cap)
PROBES: list[str] = [
    "SELECT * FROM visits WHERE 1=0",
    "SELECT * FROM visits WHERE false",
    "SELECT * FROM main.visits LIMIT 0",
    "SELECT patient_id, note FROM visits WHERE (NOT true)",
    "SELECT * FROM visits WHERE cost > 5 AND 1 = 2",
    "SELECT * FROM visits LIMIT 0 OFFSET 10",
    "SELECT note FROM visits WHERE 'a' <> 'a' ORDER BY note",
    "SELECT clinic FROM visits WHERE 1 = 0 GROUP BY clinic",
    "SELECT * FROM (SELECT clinic, dp_count(*, epsilon := 0.1) AS n FROM visits GROUP BY clinic) AS q LIMIT 0",
    "SELECT * FROM (SELECT clinic, dp_mean(cost, epsilon := 5) AS m FROM visits GROUP BY clinic) AS q WHERE 1=0",
    "SELECT * FROM (SELECT note, cost FROM visits WHERE note = 'CANARY_7731') AS q LIMIT 0",
    "SELECT * FROM (SELECT clinic, avg(cost) AS a FROM visits GROUP BY clinic) AS q WHERE 1=0",
    "SELECT * FROM (SELECT * FROM visits v JOIN clinics c USING (clinic)) AS q LIMIT 0",
    "SELECT name FROM clinics WHERE false",
    "SELECT note FROM visits WHERE false UNION ALL SELECT name FROM clinics LIMIT 0",
    "SELECT note FROM visits WHERE 1 = 0 UNION ALL SELECT note FROM visits WHERE false",
    "WITH x AS (SELECT * FROM visits) SELECT * FROM x LIMIT 0",
    "SELECT dp_count_ci(*, epsilon := 0.1) AS n, dp_count(*, epsilon := 0.1) FROM visits LIMIT 0",
]

#: pick-lists answered from the declared keys (issue 19): ``(sql, rows)`` on ``extended_catalog()``; the data
#: of ``conftest.hospital`` also hold clinic 'D' (not declared): the answer is the declared domain
PICK_LISTS: list[tuple[str, list[tuple]]] = [
    ("SELECT DISTINCT clinic FROM visits", [("A",), ("B",), ("C",)]),
    ("SELECT clinic FROM main.visits GROUP BY clinic ORDER BY clinic LIMIT 1000", [("A",), ("B",), ("C",)]),
    ("SELECT DISTINCT v.clinic AS c FROM visits AS v ORDER BY c DESC", [("C",), ("B",), ("A",)]),
    ("SELECT DISTINCT clinic FROM visits WHERE clinic <> 'B' ORDER BY 1", [("A",), ("C",)]),
    ("SELECT clinic FROM visits GROUP BY 1 ORDER BY 1 LIMIT 2 OFFSET 1", [("B",), ("C",)]),
    ("SELECT DISTINCT kind FROM events ORDER BY kind", [("x",), ("y",)]),
    ("SELECT kind FROM events WHERE kind LIKE 'y%' GROUP BY kind", [("y",)]),
]

#: plain aggregates under the data owner's opt-in of epsilon 0.1 per call (issue 19): ``(sql, the dp_* query
#: it must cost exactly like)`` on ``hospital_catalog()`` with ``plain_aggregate_epsilon="0.1"``
PLAIN: list[tuple[str, str]] = [
    ("SELECT COUNT(*) AS count FROM visits", "SELECT dp_count_star(epsilon := 0.1) AS count FROM visits"),
    ("SELECT clinic, AVG(cost) AS avg_cost FROM visits GROUP BY clinic ORDER BY clinic",
     "SELECT clinic, dp_mean(cost, epsilon := 0.1) AS avg_cost FROM visits GROUP BY clinic ORDER BY clinic"),
    ("SELECT clinic, COUNT(*) AS count FROM visits GROUP BY clinic ORDER BY COUNT(*) DESC LIMIT 10000",
     "SELECT clinic, dp_count_star(epsilon := 0.1) AS count FROM visits GROUP BY clinic ORDER BY 2 DESC LIMIT 10000"),
    ("SELECT sum(cost), count(note) FROM visits WHERE cost > 10",
     'SELECT dp_sum(cost, epsilon := 0.1) AS "sum(cost)", dp_count(note, epsilon := 0.1) AS "count(note)" '
     "FROM visits WHERE cost > 10"),
    ("SELECT clinic, sum(cost) AS s FROM visits GROUP BY clinic HAVING sum(cost) > 100",
     "SELECT clinic, dp_sum(cost, epsilon := 0.1) AS s FROM visits GROUP BY clinic HAVING s > 100"),
    ("SELECT avg(c) AS m FROM (SELECT cost * 2 AS c, patient_id FROM visits) AS t",
     "SELECT dp_mean(c, epsilon := 0.1) AS m FROM (SELECT cost * 2 AS c, patient_id FROM visits) AS t"),
    ("SELECT count(*) AS n FROM clinics", "SELECT count(*) AS n FROM clinics"),
    # issue 15, item 4: a per-unit aggregation keeps its plain aggregates; the one around it is rewritten
    ("SELECT avg(total) AS m FROM (SELECT patient_id, sum(cost) AS total FROM visits GROUP BY patient_id) AS t",
     "SELECT dp_mean(total, epsilon := 0.1) AS m FROM (SELECT patient_id, sum(cost) AS total FROM visits "
     "GROUP BY patient_id) AS t"),
]
