"""Locate the project's ``sql/`` directory (repo checkout / editable install, or a wheel's data files)."""

from __future__ import annotations

import sys
from pathlib import Path


def sql_dir() -> Path:
    here = Path(__file__).resolve().parent.parent / "sql"
    if here.is_dir():
        return here
    return Path(sys.prefix) / "share" / "dpsql" / "sql"


def read_sql(name: str) -> str:
    """The text of ``sql/<name>``."""
    return (sql_dir() / name).read_text(encoding="utf-8")


def statements(name: str) -> list[str]:
    """``sql/<name>`` split into statements (``;`` at line end; comments dropped)."""
    text = "\n".join(line for line in read_sql(name).splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in text.split(";\n") if s.strip().rstrip(";")]
