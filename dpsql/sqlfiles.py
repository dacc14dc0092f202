"""The former home of the ``sql/`` file helpers, kept so that imports of it still work: their home is
:mod:`dpsql.sqltext` (``statements`` here is :func:`dpsql.sqltext.script`)."""

from __future__ import annotations

from .sqltext import read_sql, sql_dir
from .sqltext import script as statements

__all__ = ["sql_dir", "read_sql", "statements"]
