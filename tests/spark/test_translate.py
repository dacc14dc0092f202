"""The translator over the guard's corpus: every allowed query translates (or is refused with DPSQL-E013, never
dropped silently); totality, rounding, typed NULLs and the salted order are in the Spark text; Spark analyses
the translations (tests/spark/test_spark_corpus.py runs them)."""

from __future__ import annotations

import re

import pytest
from corpus import ALLOWED, extended_catalog, hospital_catalog

from dpsql.errors import PrivacyError
from dpsql.guard import plan
from dpsql.spark import CODE, translate

VIEWS = {t: f"_dpsql_t_{t}" for t in ("visits", "clinics", "diag", "events", "accounts")}


def _translated(sql: str):
    p = plan(sql, extended_catalog(delta=1e-6))
    try:
        return translate(p.sql, VIEWS)
    except PrivacyError as e:
        assert e.code == CODE
        return None


def test_every_allowed_query_translates_or_is_refused_with_the_code():
    done = [_translated(q) for q, _ in ALLOWED]
    assert sum(t is not None for t in done) == len(ALLOWED)  # today: all of them


def test_rand_is_a_salted_hash_fresh_per_translation():
    p = plan("SELECT dp_count(*, epsilon := 1) FROM visits", hospital_catalog())
    a, b = translate(p.sql, VIEWS), translate(p.sql, VIEWS)
    assert a.salted and "XXHASH64(" in a.sql and "RAND" not in a.sql.upper().replace("_DPSQL_R", "")
    assert a.sql != b.sql  # a fresh salt


def test_spark_rand_is_refused():
    with pytest.raises(PrivacyError) as e:
        translate("SELECT random() AS r FROM visits")
    assert e.value.code == CODE


def test_unknown_function_is_refused_not_dropped():
    p = plan("SELECT dp_count(*, epsilon := 1) FROM visits WHERE starts_with(note, 'n1')", hospital_catalog())
    with pytest.raises(PrivacyError) as e:
        translate(p.sql, VIEWS)
    assert e.value.code == CODE and "StartsWith" in e.value.message


def test_totality_maps_to_try_forms():
    p = plan("SELECT dp_sum(cost / 0 + cost * 2 - 1, epsilon := 1) FROM visits WHERE TRY_CAST(note AS INTEGER) > 1",
             hospital_catalog())
    sql = translate(p.sql, VIEWS).sql
    for fn in ("TRY_DIVIDE(", "TRY_MULTIPLY(", "TRY_ADD(", "TRY_SUBTRACT(", "TRY_CAST("):
        assert fn in sql
    code = re.sub(r"`[^`]*`", "", sql)  # not the output names
    assert " / " not in code and "TRY(" not in code


def test_native_route_rounds_and_parenthesises():
    p = plan("SELECT dp_sum(cost - 1, epsilon := 1, lower := 0, upper := 100, method := 'clipped') FROM visits",
             hospital_catalog())
    sql = translate(p.sql, VIEWS).sql
    assert "RINT(" in sql and "_DPSQL_FIN(" in sql and "COLLECT_LIST" not in sql
    assert "_dpsql_fg" not in sql.lower() and "ISFINITE" not in sql  # literal-only helpers were evaluated


def test_udf_arguments_are_typed():
    p = plan("SELECT dp_median(cost, epsilon := 1) FROM visits", hospital_catalog())
    sql = translate(p.sql, VIEWS).sql
    assert "CAST(NULL AS DOUBLE)" in sql and "CAST(NULL AS STRING)" in sql and "CAST(1 AS DOUBLE)" in sql


def test_tables_are_the_registered_views():
    p = plan("SELECT dp_count(*, epsilon := 1) FROM main.visits", hospital_catalog())
    sql = translate(p.sql, VIEWS).sql
    assert "`_dpsql_t_visits`" in sql
    with pytest.raises(PrivacyError):
        translate("SELECT * FROM other.visits", VIEWS)


def test_nothing_raises_under_ansi_at_the_integer_extremes():
    p = plan("SELECT dp_mean(s, epsilon := 1) FROM (SELECT patient_id, sum(-patient_id) + abs(min(patient_id)) AS s "
             "FROM visits GROUP BY patient_id)", hospital_catalog())
    code = re.sub(r"`[^`]*`", "", translate(p.sql, VIEWS).sql)
    assert "TRY_SUM(" in code and "TRY_MULTIPLY(" in code and "ABS(" not in code and " SUM(" not in code


def test_macro_bodies_are_one_operand():
    """dp_mean's native route subtracts the centre ``lo / 2 + hi / 2``: folded to one literal, never spliced."""
    p = plan("SELECT dp_mean(cost, epsilon := 1, lower := 10, upper := 30, method := 'clipped') FROM visits",
             hospital_catalog())
    sql = translate(p.sql, VIEWS).sql
    assert "TRY_CAST(20.0 AS DOUBLE)" in sql and "TRY_CAST(10.0 AS DOUBLE)" in sql  # the centre, the half-width
