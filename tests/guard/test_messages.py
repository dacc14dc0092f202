"""Issue 14, item 2: refusals that say why."""

import pytest

from dpsql.errors import PrivacyError
from dpsql.guard import plan
from dpsql.guard.catalog import Catalog, TableInfo

VISITS = TableInfo("visits", "protected", {"patient_id": "BIGINT", "name": "VARCHAR", "cost": "DECIMAL(18,3)",
                                           "day": "DATE"}, privacy_unit="patient_id")
CAT = Catalog({"visits": VISITS})


@pytest.mark.parametrize(("sql", "typ"), [("SELECT dp_mean(name, epsilon := 1) FROM visits", "VARCHAR"),
                                          ("SELECT dp_quantile(v.day, 0.5, epsilon := 1) FROM visits v", "DATE")])
def test_a_non_numeric_value_is_refused_with_its_type_and_a_way_out(sql, typ):
    with pytest.raises(PrivacyError) as e:
        plan(sql, CAT)
    assert e.value.code == "DPSQL-E060" and typ in str(e.value) and "TRY_CAST" in str(e.value)


@pytest.mark.parametrize("sql", ["SELECT dp_mean(cost, epsilon := 1) FROM visits",
                                 "SELECT dp_count(name, epsilon := 1) FROM visits"])
def test_numeric_values_and_counts_of_anything_pass(sql):
    assert plan(sql, CAT).cost > 0


def test_a_parse_error_says_where():
    with pytest.raises(PrivacyError) as e:
        plan("SELECT dp_count(cost, epsilon := 1) FORM visits", CAT)
    assert e.value.code == "DPSQL-E001"
    assert 'syntax error at or near "visits"' in str(e.value) and "LINE 1:" in str(e.value) and "^" in str(e.value)
