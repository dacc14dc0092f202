"""SCRAM-SHA-256 (RFC 5802 / 7677) for the wire server, and the file of per-principal verifiers.

Only verifiers are stored (``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>``, PostgreSQL's format),
never passwords.  The file sits next to the database (``<db>.passwords``), mode 0600, one JSON object.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import unicodedata
from pathlib import Path

ITERATIONS = 4096
MECHANISM = "SCRAM-SHA-256"


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


def make_verifier(password: str, *, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    """A PostgreSQL-style SCRAM-SHA-256 verifier for ``password``."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", unicodedata.normalize("NFKC", password).encode(), salt, iterations)
    stored = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    server = _hmac(salted, b"Server Key")
    return f"{MECHANISM}${iterations}:{_b64(salt)}${_b64(stored)}:{_b64(server)}"


def mock_verifier(secret: bytes, principal: str) -> str:
    """A stable stand-in verifier for a principal that does not exist: salt and keys are HMACs of a server
    secret and the name.  The salt is the same on every attempt (a fresh random salt for unknown names only
    told them apart from real ones), and no PBKDF2 runs (a real login only parses its stored verifier, so
    the work is the same)."""
    name = unicodedata.normalize("NFKC", principal).encode()
    salt = _hmac(secret, b"salt\0" + name)[:16]
    stored, server = _hmac(secret, b"stored\0" + name), _hmac(secret, b"server\0" + name)
    return f"{MECHANISM}${ITERATIONS}:{_b64(salt)}${_b64(stored)}:{_b64(server)}"


def parse_verifier(verifier: str) -> tuple[int, bytes, bytes, bytes]:
    """(iterations, salt, stored_key, server_key) from a verifier string."""
    mech, params, keys = verifier.split("$")
    if mech != MECHANISM:
        raise ValueError("not a SCRAM-SHA-256 verifier")
    iters, salt = params.split(":")
    stored, server = keys.split(":")
    return int(iters), base64.b64decode(salt), base64.b64decode(stored), base64.b64decode(server)


def password_file(database: str | os.PathLike[str]) -> Path:
    """Where the verifiers for ``database`` live."""
    return Path(f"{os.fspath(database)}.passwords")


class PasswordStore:
    """Per-principal SCRAM verifiers kept in a small JSON file (mode 0600)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def _load(self) -> dict[str, str]:
        if not self.path.exists():
            return {}
        return dict(json.loads(self.path.read_text()))

    def set_password(self, principal: str, password: str) -> None:
        """Store (or replace) the verifier for ``principal``."""
        data = self._load()
        data[principal] = make_verifier(password)
        self._save(data)

    def remove(self, principal: str) -> None:
        """Forget ``principal``'s verifier (it can no longer log in to the server)."""
        data = self._load()
        data.pop(principal, None)
        self._save(data)

    def _save(self, data: dict[str, str]) -> None:
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)

    def verifier(self, principal: str) -> str | None:
        return self._load().get(principal)

    def mock_secret(self) -> bytes:
        """The secret behind :func:`mock_verifier` (``<passwords>.key``, 32 random bytes, mode 0600, made on
        first use and kept, so an unknown name's salt is stable across restarts as a real one's is)."""
        key = self.path.with_suffix(self.path.suffix + ".key")
        if not key.exists():
            with contextlib.suppress(FileExistsError):
                fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(secrets.token_bytes(32))
        return key.read_bytes()

    def principals(self) -> list[str]:
        return sorted(self._load())


class ScramExchange:
    """Server side of one SCRAM-SHA-256 exchange.  ``known=False`` simulates a user that does not exist
    (give it :func:`mock_verifier`'s stand-in: the same messages as for a real user, never a success)."""

    def __init__(self, verifier: str, known: bool = True) -> None:
        self._known = known
        self.iterations, self.salt, self.stored_key, self.server_key = parse_verifier(verifier)
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2 = ""

    def first(self, client_first: bytes) -> bytes:
        """Handle client-first-message; return server-first-message."""
        text = client_first.decode()
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or parts[0] == "p":
            raise ValueError("unsupported SCRAM channel binding")
        self._gs2 = parts[0] + "," + parts[1] + ","
        self._client_first_bare = parts[2]
        attrs = dict(a.split("=", 1) for a in self._client_first_bare.split(",") if "=" in a)
        client_nonce = attrs.get("r", "")
        if not client_nonce:
            raise ValueError("missing client nonce")
        self._nonce = client_nonce + base64.b64encode(secrets.token_bytes(18)).decode()
        self._server_first = f"r={self._nonce},s={_b64(self.salt)},i={self.iterations}"
        return self._server_first.encode()

    def final(self, client_final: bytes) -> bytes | None:
        """Check client-final-message; return server-final-message, or None when the proof is wrong."""
        text = client_final.decode()
        without_proof, _, proof_part = text.rpartition(",p=")
        attrs = dict(a.split("=", 1) for a in without_proof.split(",") if "=" in a)
        if attrs.get("r") != self._nonce or attrs.get("c") != _b64(self._gs2.encode()):
            return None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            return None
        signature = _hmac(self.stored_key, auth_message)
        if len(proof) != len(signature):
            return None
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        ok = hmac.compare_digest(hashlib.sha256(client_key).digest(), self.stored_key)
        if not (ok and self._known):
            return None
        return f"v={_b64(_hmac(self.server_key, auth_message))}".encode()
