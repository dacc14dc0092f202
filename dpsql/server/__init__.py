"""PostgreSQL-wire front door: psql, JDBC/BI tools, SQLAlchemy and friends reach guarded sessions here."""

from .auth import PasswordStore, make_verifier, password_file
from .pgwire import PgServer, running, serve, tls_context

__all__ = ["PasswordStore", "PgServer", "make_verifier", "password_file", "running", "serve", "tls_context"]
