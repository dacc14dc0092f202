"""The estimator core imports neither duckdb nor sqlglot (layering)."""

import subprocess
import sys


def test_core_imports_no_duckdb_or_sqlglot():
    code = (
        "import sys, dpsql.core, dpsql.core.estimators, dpsql.noise;"
        "bad = [m for m in ('duckdb', 'sqlglot') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
