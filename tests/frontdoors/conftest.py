from .harness import real_db, real_server, tls_files  # noqa: F401
