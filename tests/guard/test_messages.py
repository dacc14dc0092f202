"""Issue 14, item 2: refusals that say why."""

import pytest

from dpsql.errors import PrivacyError
from dpsql.guard import plan
from dpsql.guard.catalog import Catalog, TableInfo

VISITS = TableInfo("visits", "protected", {"patient_id": "BIGINT", "name": "VARCHAR", "cost": "DECIMAL(18,3)",
                                           "day": "DATE"}, privacy_unit="patient_id")
CLINICS = TableInfo("clinics", "public", {"clinic": "VARCHAR", "region": "VARCHAR"})
CAT = Catalog({"visits": VISITS, "clinics": CLINICS})


@pytest.mark.parametrize(("sql", "text", "typ"), [("SELECT dp_mean(name, epsilon := 1) FROM visits", "name", "VARCHAR"),
                                                  ("SELECT dp_quantile(v.day, 0.5, epsilon := 1) FROM visits v",
                                                   "v.day", "DATE")])
def test_a_non_numeric_value_is_refused_with_its_type_and_a_way_out(sql, text, typ):
    fn = sql.split("(")[0].split()[-1]
    with pytest.raises(PrivacyError) as e:
        plan(sql, CAT)
    assert str(e.value) == (f"DPSQL-E060: {fn}: its value must be numeric; {text} is {typ} (convert it, e.g. "
                            f"TRY_CAST({text} AS DOUBLE), or count it with dp_count)")


@pytest.mark.parametrize("sql", ["SELECT dp_mean(cost, epsilon := 1) FROM visits",
                                 "SELECT dp_count(name, epsilon := 1) FROM visits"])
def test_numeric_values_and_counts_of_anything_pass(sql):
    assert plan(sql, CAT).cost > 0


def test_a_parse_error_says_where():
    with pytest.raises(PrivacyError) as e:
        plan("SELECT dp_count(cost, epsilon := 1) FORM visits", CAT)
    assert str(e.value) == ('DPSQL-E001: the query could not be parsed as DuckDB SQL: syntax error at or near '
                            '"visits"\nLINE 1: SELECT dp_count(cost, epsilon := 1) FORM visits\n'
                            '                                                 ^^^^^^')


@pytest.mark.parametrize("sql", ["DESCRIBE visits", "SHOW TABLES", "SUMMARIZE visits", "-- look\n  desc visits",
                                 "PRAGMA table_info('visits')"])
def test_a_catalog_statement_says_where_the_schema_is(sql):
    with pytest.raises(PrivacyError) as e:
        plan(sql, CAT)
    assert e.value.code == "DPSQL-E003"
    assert "information_schema.columns through `dpsql serve`, Session.tables() in Python" in str(e.value)


def test_other_statements_get_no_catalog_pointer():
    with pytest.raises(PrivacyError) as e:
        plan("DELETE FROM visits", CAT)
    assert e.value.code == "DPSQL-E003" and "information_schema" not in str(e.value)


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT dp_mean(cots, epsilon := 1) FROM visits",
     "column 'cots' is not a column of visits (did you mean 'cost'?)"),
    ("SELECT dp_mean(cost, epsilon := 1) FROM visits WHERE nosuch > 1", "column 'nosuch' is not a column of visits"),
    ("SELECT dp_mean(v.cots, epsilon := 1) FROM visits v", "column 'cots' is not a column of v (did you mean 'cost'?)"),
    ("SELECT dp_mean(x.cost, epsilon := 1) FROM visits v", "column x.cost: no table or alias 'x' in this FROM clause "
                                                            "(it has v)"),
    ("SELECT dp_count(region, epsilon := 1) FROM visits v JOIN clinics c ON v.name = c.clinic "
     "JOIN clinics d ON v.name = d.clinic", "column 'region' is ambiguous: c and d both have it (qualify it, e.g. "
                                            "c.region)"),
])
def test_an_unknown_column_is_not_told_to_be_qualified(sql, message):
    """Issue 14: an unknown column used to read "unknown or ambiguous (qualify it with its table)"."""
    with pytest.raises(PrivacyError) as e:
        plan(sql, CAT)
    assert str(e.value) == f"DPSQL-E012: {message}"
