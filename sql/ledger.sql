-- dpsql budget ledger: its own DuckDB file next to the data file (hospital.duckdb -> hospital.ledger.duckdb),
-- mode 0600, opened only by dpsql.ledger under a process lock plus a cross-process file lock, and never
-- attached to the executor connection.  Design: docs/operations.md ("The ledger").
-- Amounts are exact decimals (bind decimal.Decimal, never float) and costs are rounded up to 1e-18.

-- key/value facts: schema_version (2), dataset_id (must match dpsql.meta in the data file), data_version
-- (the data owner's declared version of the data, 1 until the first `dpsql admin data-version --bump`; it
-- equals the last data_version entry of the log).  A version-1 file (no replays, no releases table) is
-- migrated when it is opened (dpsql.ledger.Ledger._migrate).
CREATE TABLE IF NOT EXISTS meta (
  key            VARCHAR PRIMARY KEY,
  value          VARCHAR NOT NULL
);

-- one row per principal; limit_ in epsilon ('pure') or rho ('zcdp'); per_query_cap NULL = no cap;
-- delta_per_query: the delta one query may spend on partition selection (NULL = the whole delta_limit).
-- The charge protocol is one conditional UPDATE: spent + c <= limit_ (a concurrent writer conflicts).
CREATE TABLE IF NOT EXISTS budgets (
  principal      VARCHAR PRIMARY KEY,
  accounting     VARCHAR NOT NULL CHECK (accounting IN ('pure', 'zcdp')),
  limit_         DECIMAL(38, 18) NOT NULL CHECK (limit_ >= 0),
  spent          DECIMAL(38, 18) NOT NULL DEFAULT 0,
  delta_limit    DECIMAL(38, 30) NOT NULL DEFAULT 0 CHECK (delta_limit >= 0 AND delta_limit < 1),
  delta_spent    DECIMAL(38, 30) NOT NULL DEFAULT 0,
  per_query_cap  DECIMAL(38, 18),
  delta_per_query DECIMAL(38, 30)
);

-- optional dataset-wide limits, one per accounting, bounding what all principals together
-- (colluding analysts, one person with several accounts) can spend
CREATE TABLE IF NOT EXISTS global_budgets (
  accounting     VARCHAR PRIMARY KEY CHECK (accounting IN ('pure', 'zcdp')),
  limit_         DECIMAL(38, 18) NOT NULL CHECK (limit_ >= 0),
  spent          DECIMAL(38, 18) NOT NULL DEFAULT 0,
  delta_limit    DECIMAL(38, 30) NOT NULL DEFAULT 0,
  delta_spent    DECIMAL(38, 30) NOT NULL DEFAULT 0
);

-- append-only, hash-chained log of every grant, global limit, charge, replay and data version.  Only status
-- changes after insertion (reserved -> released | failed_after_start); it is outside the hash.
-- row_hash = sha256(prev_hash || canonical immutable fields), see dpsql.ledger.entry_hash.
-- budgets and global_budgets must equal what this log implies; the ledger checks both at open.
-- A replay costs nothing and names the charge whose stored release it returned again (ref_seq, hashed);
-- a data_version entry (principal '*', accounting 'none') declares the new version in amount.
CREATE TABLE IF NOT EXISTS entries (
  seq            BIGINT PRIMARY KEY,
  entry_id       VARCHAR NOT NULL UNIQUE,
  kind           VARCHAR NOT NULL CHECK (kind IN ('grant', 'global_limit', 'charge', 'replay', 'data_version')),
  ts             TIMESTAMP NOT NULL,                             -- UTC
  principal      VARCHAR NOT NULL,
  session_id     VARCHAR,
  accounting     VARCHAR NOT NULL CHECK (accounting IN ('pure', 'zcdp', 'none')),
  amount         DECIMAL(38, 18) NOT NULL CHECK (amount >= 0),  -- charge: cost; grant: the new limit;
                                                                 -- data_version: the new version; replay: 0
  delta          DECIMAL(38, 30) NOT NULL DEFAULT 0,             -- charge: delta; grant: the new delta limit
  cap            DECIMAL(38, 18),                                -- grant: the new per-query cap
  delta_cap      DECIMAL(38, 30),                                -- grant: the new delta per query
  query_sha256   VARCHAR,                                        -- charge, replay: sha256 of the checked SQL
  mechanisms     VARCHAR,                                        -- charge, replay: canonical JSON of the plan's
                                                                 -- mechanisms; data_version: {"note": ...}
  status         VARCHAR NOT NULL CHECK (status IN ('granted', 'reserved', 'released', 'failed_after_start')),
  prev_hash      VARCHAR NOT NULL,
  row_hash       VARCHAR NOT NULL,
  ref_seq        BIGINT                                          -- replay: the seq of the charge it replays
);

-- released results kept for replay (dpsql.session: the same checked query of the same principal on the same
-- data version is answered again from here, at no cost).  Only rows that were released are stored (never a
-- refusal, a timeout or a failure).  Bounded per principal (dpsql.ledger.RELEASE_CAP releases and
-- RELEASE_BYTES bytes, least recently used evicted first); a data-version bump drops older versions' rows.
-- A cache, not evidence: the log's replay entries are the record.
CREATE TABLE IF NOT EXISTS releases (
  seq            BIGINT PRIMARY KEY,                             -- the charge that paid for this release
  principal      VARCHAR NOT NULL,
  data_version   BIGINT NOT NULL,
  query_key      VARCHAR NOT NULL,                               -- sha256 of the normalized checked SQL
  stored_at      TIMESTAMP NOT NULL,                             -- UTC
  used_at        TIMESTAMP NOT NULL,                             -- last release or replay (eviction order)
  nbytes         BIGINT NOT NULL,
  result         BLOB NOT NULL                                   -- Arrow IPC stream of the released table
);

-- guarded sessions (who was connected when); kept here because the data file is read-only to sessions
CREATE TABLE IF NOT EXISTS sessions (
  session_id     VARCHAR PRIMARY KEY,
  principal      VARCHAR NOT NULL,
  pid            INTEGER NOT NULL,
  opened_at      TIMESTAMP NOT NULL,
  closed_at      TIMESTAMP
);
