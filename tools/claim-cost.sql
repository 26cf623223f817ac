-- What it costs this server to hand 100,000 roots of a dead owner to another owner, whatever the claim around it
-- (docs/postgresql.md, "What a claim of 100,000 costs the server"). Three ways, each one statement on 100,000 rows:
--   1. the owner column of the tasks table, as the schema has it (owner_id leads an index: no HOT update);
--   2. the same with owner_id in no index (a HOT update where the page has room);
--   3. a narrow table of claims (root id, owner), its owner indexed: changing the owner, then deleting the rows.
-- Run from the repository's root against a scratch database (it makes and drops the schema claim_cost):
--   psql -h HOST -p PORT -U postgres -f tools/claim-cost.sql
\set ON_ERROR_STOP on
DROP SCHEMA IF EXISTS claim_cost CASCADE;
CREATE SCHEMA claim_cost;
SET search_path = claim_cost;
\i migrations/postgres/0001_initial.sql
\i migrations/postgres/0002_fleet_and_time.sql
INSERT INTO tasks (id, root_id, name, kind, input, options, status, owner_id, priority, created_at, updated_at, started_at)
SELECT 'r' || g, 'r' || g, 'job ' || g, 'checksum', '\x7b7d', '{}', 'running', 'dead', 0, 1000 + g, 1000 + g, 2000 + g
FROM generate_series(1, 100000) g;
VACUUM ANALYZE tasks;
\echo '1. tasks.owner_id, as indexed by the schema:'
\timing on
UPDATE tasks SET owner_id = 'alive1' WHERE parent_id IS NULL AND finished_at IS NULL AND owner_id = 'dead';
\timing off
DROP INDEX tasks_roots_unfinished;
CREATE INDEX tasks_roots_unfinished ON tasks (priority DESC, created_at, id)
    WHERE parent_id IS NULL AND finished_at IS NULL;
VACUUM ANALYZE tasks;
SELECT pg_stat_reset_single_table_counters('claim_cost.tasks'::regclass);
\echo '2. tasks.owner_id in no index:'
\timing on
UPDATE tasks SET owner_id = 'alive2' WHERE parent_id IS NULL AND finished_at IS NULL AND owner_id = 'alive1';
\timing off
SELECT pg_sleep(1);
SELECT n_tup_upd AS updated, n_tup_hot_upd AS of_which_hot FROM pg_stat_user_tables
WHERE schemaname = 'claim_cost' AND relname = 'tasks';
CREATE TABLE claims (root_id text COLLATE "C" PRIMARY KEY, owner_id text COLLATE "C" NOT NULL) WITH (fillfactor = 85);
CREATE INDEX claims_by_owner ON claims (owner_id);
INSERT INTO claims SELECT 'r' || g, 'dead' FROM generate_series(1, 100000) g;
VACUUM ANALYZE claims;
\echo '3. a narrow table of claims: the owner changed, then the rows deleted:'
\timing on
UPDATE claims SET owner_id = 'alive1' WHERE owner_id = 'dead';
DELETE FROM claims WHERE owner_id = 'alive1';
\timing off
DROP SCHEMA claim_cost CASCADE;
