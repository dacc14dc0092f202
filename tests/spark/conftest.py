"""One shared local[2] SparkSession for tests/spark (skipped with a reason without pyspark or java), and the
hospital data of tests/guard as Spark DataFrames."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'dpsql[spark]')")
if shutil.which("java") is None:
    pytest.skip("no java on PATH: Spark needs a JVM", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).parent.parent / "guard"))


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    # the executors' Python is this interpreter (pyarrow, dpsql), not whatever `python3` is first on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    s = (SparkSession.builder.master("local[2]").appName("dpsql-tests")
         .config("spark.sql.shuffle.partitions", "1").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.ansi.enabled", "true").getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def hospital_duck():
    """The hospital tables of tests/guard in an in-memory DuckDB (the exact reference)."""
    import importlib.util

    import duckdb

    spec = importlib.util.spec_from_file_location("_guard_conftest", Path(__file__).parent.parent / "guard"
                                                  / "conftest.py")
    guard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard)
    con = duckdb.connect()
    guard.hospital(con)
    guard.exact_binding(con)
    return con


@pytest.fixture(scope="session")
def frames(spark, hospital_duck):
    """The same tables as Spark DataFrames, by name."""
    return {t: spark.createDataFrame(hospital_duck.sql(f"SELECT * FROM {t}").to_arrow_table())
            for t in ("visits", "clinics", "diag", "events")}
