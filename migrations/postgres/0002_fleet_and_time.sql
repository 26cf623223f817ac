-- Progression on PostgreSQL, schema 2: what SQLite's migration 0004 adds — a fleet of workers, time, and visible
-- partial failure (see migrations/0004_fleet_and_time.sql for what each part is for).

ALTER TABLE owners ADD COLUMN kinds text;

ALTER TABLE job_kinds ADD COLUMN max_concurrent integer CHECK (max_concurrent IS NULL OR max_concurrent >= 1);

CREATE TABLE paused_kinds (
    name text COLLATE "C" PRIMARY KEY,
    paused_at bigint NOT NULL
);

CREATE TABLE schedules (
    name text COLLATE "C" PRIMARY KEY,
    kind text COLLATE "C" NOT NULL,
    input bytea,
    cron text NOT NULL,
    time_zone text NOT NULL,
    missed text NOT NULL CHECK (missed IN ('skip', 'once', 'each')),
    max_missed integer NOT NULL DEFAULT 1 CHECK (max_missed >= 1),
    job_name text,
    options text,
    priority integer NOT NULL DEFAULT 0,
    paused boolean NOT NULL DEFAULT false,
    next_fire_at bigint NOT NULL,
    last_fire_at bigint,
    last_job_id text COLLATE "C",
    declared_by text COLLATE "C",
    updated_at bigint NOT NULL
);

-- The earliest tick of the schedules that run.
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE NOT paused;

ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN (
    'created', 'started', 'step', 'progress', 'paused', 'resumed', 'checkpointed', 'completed', 'failed',
    'cancelled', 'retried', 'interrupted', 'recovered', 'scheduled', 'sleeping'));

ALTER TABLE control_requests DROP CONSTRAINT control_requests_action_check;
ALTER TABLE control_requests ADD CONSTRAINT control_requests_action_check
    CHECK (action IN ('pause', 'resume', 'cancel', 'retry', 'remove', 'run-now'));

-- Unfinished roots that wait for a time (a run-at, a retry's backoff, a durable sleep), by that time.
CREATE INDEX tasks_roots_waiting ON tasks (next_attempt_at)
    WHERE parent_id IS NULL AND finished_at IS NULL AND next_attempt_at IS NOT NULL;

-- The failed steps of a root (a job that completed with failed steps says so).
CREATE INDEX tasks_failed_steps ON tasks (root_id) WHERE parent_id IS NOT NULL AND status = 'failed';
