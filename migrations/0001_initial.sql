-- Progression schema 1: tasks (every node of every task tree), their event history, the executors that own them
-- (owners) and control requests written by progressctl for a live owner. Times are integer milliseconds since the
-- Unix epoch. Statuses and ranges are checked here, so no writer can store a state the library cannot read back.

CREATE TABLE owners (
    id TEXT PRIMARY KEY NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    stopped_at INTEGER
) STRICT;

CREATE TABLE tasks (
    id TEXT PRIMARY KEY NOT NULL,
    parent_id TEXT REFERENCES tasks(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    root_id TEXT NOT NULL,
    name TEXT NOT NULL,
    -- Which occurrence of this name under the parent (0, 1, …): with parent_id and name, a child's identity.
    occurrence INTEGER NOT NULL DEFAULT 0 CHECK (occurrence >= 0),
    -- The registered job kind; NULL for a closure task (and for children).
    kind TEXT,
    input BLOB,
    idempotency_key TEXT,
    -- TaskOptions as JSON.
    options TEXT NOT NULL,
    status TEXT NOT NULL
        CHECK (status IN ('pending', 'running', 'paused', 'completed', 'failed', 'cancelled')),
    -- NULL: indeterminate.
    progress REAL CHECK (progress IS NULL OR (progress >= 0.0 AND progress <= 1.0)),
    step TEXT,
    weight REAL NOT NULL DEFAULT 1.0 CHECK (weight > 0.0),
    attempt INTEGER NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    interruptions INTEGER NOT NULL DEFAULT 0 CHECK (interruptions >= 0),
    error_type TEXT,
    error_description TEXT,
    -- A completed step's Codable output (JSON).
    result BLOB,
    checkpoint BLOB,
    owner_id TEXT,
    lease_expires_at INTEGER,
    priority INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    updated_at INTEGER NOT NULL,
    finished_at INTEGER,
    next_attempt_at INTEGER,
    CHECK ((parent_id IS NULL) = (root_id = id)),
    CHECK ((status IN ('completed', 'failed', 'cancelled')) = (finished_at IS NOT NULL))
) STRICT;

-- A child is found again by parent, name and occurrence (re-runs after a crash); also serves the foreign key.
CREATE UNIQUE INDEX tasks_child_identity ON tasks (parent_id, name, occurrence) WHERE parent_id IS NOT NULL;
-- Loading a tree, deleting a root's subtree.
CREATE INDEX tasks_by_root ON tasks (root_id);
-- Listing roots newest first, all or by status or kind (progressctl list, pagination).
CREATE INDEX tasks_roots_by_created ON tasks (created_at DESC, id DESC) WHERE parent_id IS NULL;
CREATE INDEX tasks_roots_by_status ON tasks (status, created_at DESC, id DESC) WHERE parent_id IS NULL;
CREATE INDEX tasks_roots_by_kind ON tasks (kind, created_at DESC, id DESC) WHERE parent_id IS NULL;
-- The scheduler: roots to run, by priority then age; the tasks an owner holds.
CREATE INDEX tasks_roots_runnable ON tasks (status, priority DESC, created_at, id) WHERE parent_id IS NULL;
CREATE INDEX tasks_by_owner ON tasks (owner_id, status) WHERE owner_id IS NOT NULL;
-- A second submit with the same idempotency key finds the first.
CREATE UNIQUE INDEX tasks_idempotency ON tasks (kind, idempotency_key) WHERE idempotency_key IS NOT NULL;
-- Pruning finished tasks by age.
CREATE INDEX tasks_roots_finished ON tasks (finished_at) WHERE parent_id IS NULL AND finished_at IS NOT NULL;

-- Append-only history. No foreign key: deleting a task deletes its events by root, which the index serves.
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL,
    root_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN (
        'created', 'started', 'step', 'progress', 'paused', 'resumed', 'checkpointed', 'completed', 'failed',
        'cancelled', 'retried', 'interrupted', 'recovered')),
    at INTEGER NOT NULL,
    attempt INTEGER NOT NULL CHECK (attempt >= 1),
    progress REAL CHECK (progress IS NULL OR (progress >= 0.0 AND progress <= 1.0)),
    message TEXT,
    error_type TEXT
) STRICT;

CREATE INDEX events_by_root ON events (root_id, id);

-- Requests of progressctl to a live owner; the owner marks each handled with its outcome.
CREATE TABLE control_requests (
    id INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('pause', 'resume', 'cancel', 'retry', 'remove')),
    owner_id TEXT,
    requested_at INTEGER NOT NULL,
    handled_at INTEGER,
    outcome TEXT
) STRICT;

CREATE INDEX control_requests_pending ON control_requests (owner_id, id) WHERE handled_at IS NULL;
