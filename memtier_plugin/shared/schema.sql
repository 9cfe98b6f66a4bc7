-- memtier shared tiers, schema version 1 (docs/shared.md). Applied by `memtier shared init` under an
-- advisory lock, so hosts may run it at once; every statement is idempotent.
CREATE TABLE IF NOT EXISTS memtier_records (
  tenant      text   NOT NULL,
  tier        text   NOT NULL CHECK (tier IN ('semantic', 'global', 'procedural', 'state', 'forgotten')),
  scope       text   NOT NULL,          -- the project, or '*' for the Global layer
  id          text   NOT NULL,          -- the ledger record's own id (sf-, gk-, up-, sk-, ws-, sx-)
  kind        text   NOT NULL,          -- fact | superseded | knowledge | retired | skill | state | forget
  rev_key     text,                     -- what supersession is keyed on (subject+attribute, scope+attribute)
  target      text,                     -- the record this one retires, if any
  stated_at   double precision NOT NULL DEFAULT 0,  -- statement time (epoch seconds): it decides the head
  body        jsonb  NOT NULL,          -- the ledger line, as the local readers validate it
  origin_host text   NOT NULL,
  txid        xid8   NOT NULL DEFAULT pg_current_xact_id(),
  seq         bigint GENERATED ALWAYS AS IDENTITY,
  recorded_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS memtier_records_feed ON memtier_records (tenant, seq);
CREATE INDEX IF NOT EXISTS memtier_records_key ON memtier_records (tenant, tier, scope, rev_key);
CREATE INDEX IF NOT EXISTS memtier_records_target ON memtier_records (tenant, target);
CREATE TABLE IF NOT EXISTS memtier_heads (      -- the one current version per revision key
  tenant    text NOT NULL,
  tier      text NOT NULL,
  scope     text NOT NULL,
  rev_key   text NOT NULL,
  head_id   text NOT NULL,
  stated_at double precision NOT NULL,
  version   integer NOT NULL DEFAULT 1,
  PRIMARY KEY (tenant, tier, scope, rev_key)
);
CREATE TABLE IF NOT EXISTS memtier_hosts (      -- observability: each host's place in the feed
  tenant  text NOT NULL,
  host    text NOT NULL,
  cursor  bigint NOT NULL DEFAULT 0,
  seen    timestamptz NOT NULL DEFAULT now(),
  version text,
  PRIMARY KEY (tenant, host)
);
CREATE TABLE IF NOT EXISTS memtier_schema (version integer PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now());
ALTER TABLE memtier_records ENABLE ROW LEVEL SECURITY;
ALTER TABLE memtier_records FORCE ROW LEVEL SECURITY;
ALTER TABLE memtier_heads ENABLE ROW LEVEL SECURITY;
ALTER TABLE memtier_heads FORCE ROW LEVEL SECURITY;
ALTER TABLE memtier_hosts ENABLE ROW LEVEL SECURITY;
ALTER TABLE memtier_hosts FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS memtier_tenant ON memtier_records;
CREATE POLICY memtier_tenant ON memtier_records
  USING (tenant = current_setting('memtier.tenant', true)) WITH CHECK (tenant = current_setting('memtier.tenant', true));
DROP POLICY IF EXISTS memtier_tenant ON memtier_heads;
CREATE POLICY memtier_tenant ON memtier_heads
  USING (tenant = current_setting('memtier.tenant', true)) WITH CHECK (tenant = current_setting('memtier.tenant', true));
DROP POLICY IF EXISTS memtier_tenant ON memtier_hosts;
CREATE POLICY memtier_tenant ON memtier_hosts
  USING (tenant = current_setting('memtier.tenant', true)) WITH CHECK (tenant = current_setting('memtier.tenant', true));
INSERT INTO memtier_schema (version) VALUES (1) ON CONFLICT DO NOTHING;
