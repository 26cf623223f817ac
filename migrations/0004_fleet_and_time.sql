-- Progression schema 4: a fleet of workers, time, and visible partial failure.
--
-- * owners.kinds: the job kinds each executor registered (a JSON array), so that progressctl refuses a job no live
--   worker can run and doctor names pending jobs of such kinds.
-- * job_kinds.max_concurrent: a kind's limit across every worker on the database (claims count its running jobs).
-- * paused_kinds: kinds an operator paused: no new job of them starts on any worker.
-- * schedules: periodic jobs declared by workers (a cron expression in a time zone); a worker fires a tick by moving
--   next_fire_at on with a compare-and-set in the same transaction as the job's insert, so each tick makes one job
--   however many workers run.
-- * events: two more kinds, 'scheduled' (a job's run-at time was set or cleared) and 'sleeping' (a job gave its slot
--   back until a time: a durable sleep). SQLite cannot change a CHECK in place: the table is rebuilt, as in 0002.
-- * control_requests: one more action, 'run-now' (a job waiting for a time runs at once). Rebuilt likewise.
-- * tasks_roots_waiting: unfinished roots that wait for a time (a run-at, a retry's backoff, a durable sleep), by that
--   time: claims take those that are due, and a worker sleeps until the earliest.
-- * tasks_failed_steps: the failed steps of a root, counted by list, stats and watch (a job that completed with
--   failed steps says so).
ALTER TABLE owners ADD COLUMN kinds TEXT;

ALTER TABLE job_kinds ADD COLUMN max_concurrent INTEGER CHECK (max_concurrent IS NULL OR max_concurrent >= 1);

CREATE TABLE paused_kinds (
    name TEXT PRIMARY KEY NOT NULL,
    paused_at INTEGER NOT NULL
) STRICT;

CREATE TABLE schedules (
    name TEXT PRIMARY KEY NOT NULL,
    kind TEXT NOT NULL,
    input BLOB,
    cron TEXT NOT NULL,
    time_zone TEXT NOT NULL,
    -- What a worker does with ticks it missed (it was down): skip them, run once for all, or run each (at most
    -- max_missed, the newest).
    missed TEXT NOT NULL CHECK (missed = 'skip' OR missed = 'once' OR missed = 'each'),
    max_missed INTEGER NOT NULL DEFAULT 1 CHECK (max_missed >= 1),
    -- The jobs' name, options (TaskOptions as JSON; NULL: the kind's) and priority.
    job_name TEXT,
    options TEXT,
    priority INTEGER NOT NULL DEFAULT 0,
    paused INTEGER NOT NULL DEFAULT 0 CHECK (paused = 0 OR paused = 1),
    next_fire_at INTEGER NOT NULL,
    last_fire_at INTEGER,
    last_job_id TEXT,
    -- The owner that last declared it, and when.
    declared_by TEXT,
    updated_at INTEGER NOT NULL
) STRICT;

-- The earliest tick of the schedules that run.
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE paused = 0;

CREATE TABLE events_v4 (
    id INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL,
    root_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (
        kind = 'created' OR kind = 'started' OR kind = 'step' OR kind = 'progress' OR kind = 'paused'
        OR kind = 'resumed' OR kind = 'checkpointed' OR kind = 'completed' OR kind = 'failed' OR kind = 'cancelled'
        OR kind = 'retried' OR kind = 'interrupted' OR kind = 'recovered' OR kind = 'scheduled' OR kind = 'sleeping'),
    at INTEGER NOT NULL,
    attempt INTEGER NOT NULL CHECK (attempt >= 1),
    progress REAL CHECK (progress IS NULL OR (progress >= 0.0 AND progress <= 1.0)),
    message TEXT,
    error_type TEXT
) STRICT;
INSERT INTO events_v4 (id, task_id, root_id, kind, at, attempt, progress, message, error_type)
SELECT id, task_id, root_id, kind, at, attempt, progress, message, error_type FROM events;
DROP TABLE events;
ALTER TABLE events_v4 RENAME TO events;
-- A root's history in order (history, show); deleting it with its root.
CREATE INDEX events_by_root ON events (root_id, id);

CREATE TABLE control_requests_v4 (
    id INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL,
    action TEXT NOT NULL CHECK (
        action = 'pause' OR action = 'resume' OR action = 'cancel' OR action = 'retry' OR action = 'remove'
        OR action = 'run-now'),
    owner_id TEXT,
    requested_at INTEGER NOT NULL,
    handled_at INTEGER,
    outcome TEXT
) STRICT;
INSERT INTO control_requests_v4 (id, task_id, action, owner_id, requested_at, handled_at, outcome)
SELECT id, task_id, action, owner_id, requested_at, handled_at, outcome FROM control_requests;
DROP TABLE control_requests;
ALTER TABLE control_requests_v4 RENAME TO control_requests;
CREATE INDEX control_requests_pending ON control_requests (owner_id, id) WHERE handled_at IS NULL;

CREATE INDEX tasks_roots_waiting ON tasks (next_attempt_at) WHERE parent_id IS NULL AND finished_at IS NULL
    AND next_attempt_at IS NOT NULL;

CREATE INDEX tasks_failed_steps ON tasks (root_id) WHERE parent_id IS NOT NULL AND status = 'failed';
