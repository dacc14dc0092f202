-- dpsql policy metadata, kept in the protected database itself (schema dpsql).
-- Written only by dpsql.admin (the data owner); read by guarded sessions through the read-only executor.
-- Budgets and the charge log are NOT here: they live in the ledger file (sql/ledger.sql), so that the
-- connection that runs analyst-derived SQL can never name or change them.
-- Every statement is idempotent; dpsql.policy.ensure_schema runs this file on each admin write.

CREATE SCHEMA IF NOT EXISTS dpsql;

-- key/value facts about this dataset: schema_version, dataset_id (a UUID the ledger is bound to)
CREATE TABLE IF NOT EXISTS dpsql.meta (
  key            VARCHAR PRIMARY KEY,
  value          VARCHAR NOT NULL
);

-- one row per protected table; privacy_unit NULL means row-level privacy (each row is its own unit)
CREATE TABLE IF NOT EXISTS dpsql.protected_tables (
  table_name          VARCHAR PRIMARY KEY,
  privacy_unit        VARCHAR,
  max_rows_per_unit   INTEGER NOT NULL CHECK (max_rows_per_unit >= 1),
  max_groups_per_unit INTEGER NOT NULL CHECK (max_groups_per_unit >= 1)
);

-- tables whose contents are public (lookup tables, key lists): readable without noise or charge
CREATE TABLE IF NOT EXISTS dpsql.public_tables (
  table_name     VARCHAR PRIMARY KEY
);

-- declared public key domains: one row per key, in the declared order; key_value is the text form,
-- cast back to the column's type when the catalog is built
CREATE TABLE IF NOT EXISTS dpsql.public_keys (
  table_name     VARCHAR NOT NULL,
  column_name    VARCHAR NOT NULL,
  ordinal        INTEGER NOT NULL,
  key_value      VARCHAR NOT NULL,
  PRIMARY KEY (table_name, column_name, ordinal)
);

-- analysts known to this dataset; their limits and spending are in the ledger (budgets table)
CREATE TABLE IF NOT EXISTS dpsql.principals (
  principal      VARCHAR PRIMARY KEY,
  accounting     VARCHAR NOT NULL CHECK (accounting IN ('pure', 'zcdp')),
  enabled        BOOLEAN NOT NULL DEFAULT true
);

-- opt-in (issue 19): in this principal's queries, plain COUNT(*), COUNT(x), SUM(x) and AVG(x) over protected
-- rows are rewritten to dp_count_star / dp_count / dp_sum / dp_mean with this epsilon per call (a decimal's
-- text) and charged like any dp_* call; principals without a row get those aggregates refused (E021)
CREATE TABLE IF NOT EXISTS dpsql.plain_aggregates (
  principal      VARCHAR PRIMARY KEY,
  epsilon        VARCHAR NOT NULL
);
