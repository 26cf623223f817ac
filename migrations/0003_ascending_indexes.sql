-- Progression schema 3: the two indexes of roots by age become ascending.
--
-- New roots are the newest: in a descending index every one is inserted at the b-tree's left edge, where SQLite splits
-- pages without its right-edge shortcut, so that each commit rewrote 2.5–2.7 leaf pages of each of these indexes
-- instead of one (counted in the WAL: 16.2 pages a commit of 8 jobs before, 13.4 after). SQLite reads an ascending
-- index backwards for `ORDER BY created_at DESC, id DESC` as well (checked with EXPLAIN QUERY PLAN in
-- SQLiteQueryPlanTests).

DROP INDEX tasks_roots_by_created;
-- Listing roots newest first (progressctl list, pagination, --kind and --name filters while scanning).
CREATE INDEX tasks_roots_by_created ON tasks (created_at, id) WHERE parent_id IS NULL;

DROP INDEX tasks_roots_finished;
-- Finished roots by status and age: listing completed/failed/cancelled ones, pruning.
CREATE INDEX tasks_roots_finished ON tasks (status, created_at, id)
    WHERE parent_id IS NULL AND finished_at IS NOT NULL;
