-- Progression on PostgreSQL, schema 1: the tables of the SQLite schema as it stands after its migration 0002 (the lean
-- design), in one schema of its own. The migrator runs this file with `search_path` set to that schema, so no name
-- here is qualified; several services can share one database, each in its own schema.
--
-- * Times are bigint milliseconds since the Unix epoch, as in SQLite: the two stores round and compare times alike,
--   and the executor's clock (not the server's) writes them.
-- * Text that is sorted or compared (ids, names, kinds) is COLLATE "C": byte order, as SQLite's, whatever the
--   database's locale; it also lets a btree serve id-prefix ranges.
-- * Statuses, ranges and the root/finished invariants are checked here, so no writer can store a state the library
--   cannot read back.
-- * Secondary indexes: each serves a query named beside it (checked with EXPLAIN in PostgresQueryPlanTests).

CREATE TABLE owners (
    id text COLLATE "C" PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    started_at bigint NOT NULL,
    heartbeat_at bigint NOT NULL,
    stopped_at bigint
);

CREATE TABLE tasks (
    id text COLLATE "C" PRIMARY KEY,
    parent_id text COLLATE "C",
    root_id text COLLATE "C" NOT NULL,
    name text COLLATE "C" NOT NULL,
    -- Which occurrence of this name under the parent (0, 1, …): with parent_id and name, a child's identity.
    occurrence integer NOT NULL DEFAULT 0 CHECK (occurrence >= 0),
    -- The registered job kind; NULL for a closure task (and for children).
    kind text COLLATE "C",
    input bytea,
    idempotency_key text COLLATE "C",
    -- TaskOptions as JSON (text: compared and cached as written).
    options text NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'running', 'paused', 'completed', 'failed', 'cancelled')),
    -- NULL: indeterminate.
    progress double precision CHECK (progress IS NULL OR (progress >= 0.0 AND progress <= 1.0)),
    step text,
    weight double precision NOT NULL DEFAULT 1.0 CHECK (weight > 0.0),
    attempt integer NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    interruptions integer NOT NULL DEFAULT 0 CHECK (interruptions >= 0),
    error_type text,
    error_description text,
    result bytea,
    checkpoint bytea,
    -- The executor that holds the task (owners.id, not a foreign key: an owner's row may be pruned before its tasks).
    -- A subtask is fenced through its root's owner.
    owner_id text COLLATE "C",
    lease_expires_at bigint,
    priority integer NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    started_at bigint,
    updated_at bigint NOT NULL,
    finished_at bigint,
    next_attempt_at bigint,
    -- The work a task declared, in its own units; its smoothed progress per second.
    total double precision CHECK (total IS NULL OR total > 0.0),
    rate double precision CHECK (rate IS NULL OR rate >= 0.0),
    CHECK ((parent_id IS NULL) = (root_id = id)),
    CHECK ((status IN ('completed', 'failed', 'cancelled')) = (finished_at IS NOT NULL))
) WITH (fillfactor = 85);
-- The room left in each page lets a progress update (no indexed column changes) stay on its page without new index
-- entries (a HOT update): the writer's most frequent statement.

-- A child is found again by parent, name and occurrence (re-runs after a crash).
CREATE UNIQUE INDEX tasks_child_identity ON tasks (parent_id, name, occurrence) WHERE parent_id IS NOT NULL;
-- Loading a tree (the root by its key, the rest by this), deleting a root's subtree, fencing a batch's subtasks.
CREATE INDEX tasks_children_by_root ON tasks (root_id) WHERE parent_id IS NOT NULL;
-- Listing roots newest first (progressctl list, pagination, --kind and --name filters while scanning).
CREATE INDEX tasks_roots_by_created ON tasks (created_at DESC, id DESC) WHERE parent_id IS NULL;
-- Unfinished roots by owner, priority and age: claims (FOR UPDATE SKIP LOCKED), the roots an owner holds, listing
-- pending/running/paused ones.
CREATE INDEX tasks_roots_unfinished ON tasks (owner_id, priority DESC, created_at, id)
    WHERE parent_id IS NULL AND finished_at IS NULL;
-- Finished roots by status and age: listing completed/failed/cancelled ones, pruning.
CREATE INDEX tasks_roots_finished ON tasks (status, created_at DESC, id DESC)
    WHERE parent_id IS NULL AND finished_at IS NOT NULL;
-- A second submit with the same idempotency key finds the first.
CREATE UNIQUE INDEX tasks_idempotency ON tasks (kind, idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE TABLE events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id text COLLATE "C" NOT NULL,
    root_id text COLLATE "C" NOT NULL,
    kind text NOT NULL CHECK (kind IN (
        'created', 'started', 'step', 'progress', 'paused', 'resumed', 'checkpointed', 'completed', 'failed',
        'cancelled', 'retried', 'interrupted', 'recovered')),
    at bigint NOT NULL,
    attempt integer NOT NULL CHECK (attempt >= 1),
    progress double precision CHECK (progress IS NULL OR (progress >= 0.0 AND progress <= 1.0)),
    message text,
    error_type text
);

-- A root's history in order (history, show); deleting it with its root.
CREATE INDEX events_by_root ON events (root_id, id);

CREATE TABLE control_requests (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id text COLLATE "C" NOT NULL,
    action text NOT NULL CHECK (action IN ('pause', 'resume', 'cancel', 'retry', 'remove')),
    -- The owner that must apply it; NULL: none (applied by the next executor that loads the task).
    owner_id text COLLATE "C",
    requested_at bigint NOT NULL,
    handled_at bigint,
    outcome text
);

-- The requests an owner has yet to apply (polled on every notification, and every second as a fallback).
CREATE INDEX control_requests_pending ON control_requests (owner_id, id) WHERE handled_at IS NULL;

-- The counter behind root ids (TaskIdentifier), starting at a random value below 0.75 × 2^40 so that ids of different
-- databases differ and keep 8 characters for 2^38 roots.
CREATE SEQUENCE root_identifiers AS bigint MINVALUE 0 MAXVALUE 1099511627775 NO CYCLE;
SELECT setval('root_identifiers', floor(random() * 824633720832)::bigint, false);

CREATE TABLE job_kinds (
    name text COLLATE "C" PRIMARY KEY,
    -- TaskOptions as JSON.
    options text NOT NULL,
    updated_at bigint NOT NULL
);
