-- dpsql budget ledger: its own DuckDB file next to the data file (hospital.duckdb -> hospital.ledger.duckdb),
-- mode 0600, opened only by dpsql.ledger under a process lock plus a cross-process file lock, and never
-- attached to the executor connection.  Design: ../shared/docs/threat-classes.md section 5.
-- Amounts are exact decimals (bind decimal.Decimal, never float) and costs are rounded up to 1e-18.

-- key/value facts: schema_version, dataset_id (must match dpsql.meta in the data file)
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

-- append-only, hash-chained log of every grant, global limit and charge.  Only status changes after
-- insertion (reserved -> released | failed_after_start); it is outside the hash.
-- row_hash = sha256(prev_hash || canonical immutable fields), see dpsql.ledger.entry_hash.
-- budgets and global_budgets must equal what this log implies; the ledger checks both at open.
CREATE TABLE IF NOT EXISTS entries (
  seq            BIGINT PRIMARY KEY,
  entry_id       VARCHAR NOT NULL UNIQUE,
  kind           VARCHAR NOT NULL CHECK (kind IN ('grant', 'global_limit', 'charge')),
  ts             TIMESTAMP NOT NULL,                             -- UTC
  principal      VARCHAR NOT NULL,
  session_id     VARCHAR,
  accounting     VARCHAR NOT NULL CHECK (accounting IN ('pure', 'zcdp')),
  amount         DECIMAL(38, 18) NOT NULL CHECK (amount >= 0),  -- charge: cost; grant: the new limit
  delta          DECIMAL(38, 30) NOT NULL DEFAULT 0,             -- charge: delta; grant: the new delta limit
  cap            DECIMAL(38, 18),                                -- grant: the new per-query cap
  delta_cap      DECIMAL(38, 30),                                -- grant: the new delta per query
  query_sha256   VARCHAR,                                        -- charge: sha256 of the executed SQL
  mechanisms     VARCHAR,                                        -- charge: canonical JSON of the plan's mechanisms
  status         VARCHAR NOT NULL CHECK (status IN ('granted', 'reserved', 'released', 'failed_after_start')),
  prev_hash      VARCHAR NOT NULL,
  row_hash       VARCHAR NOT NULL
);

-- guarded sessions (who was connected when); kept here because the data file is read-only to sessions
CREATE TABLE IF NOT EXISTS sessions (
  session_id     VARCHAR PRIMARY KEY,
  principal      VARCHAR NOT NULL,
  pid            INTEGER NOT NULL,
  opened_at      TIMESTAMP NOT NULL,
  closed_at      TIMESTAMP
);
