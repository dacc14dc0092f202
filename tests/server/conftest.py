from frontdoors.harness import passwords, real_db, real_server, server, tls_files, tls_server, world  # noqa: F401
