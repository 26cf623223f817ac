-- Progression schema 5: job trees across the fleet — child jobs, durable waits for them, for other jobs and for
-- signals.
--
-- * tasks.parent_job_id: on a child job (a root that any worker claims), the id of the job that started it.
-- * tasks.child_job_id: on the node of a parent's tree that stands for a child job (its link), that job's id. A
--   link's status, progress, step, result and error follow its child's (written by the fleet's tree keeper, not by
--   the parent's executor), so the parent's tree reads whole from its own rows wherever its children run.
-- * tasks.share, tasks.awaited: on a link, what one unit of its child's progress adds to the parent's root while the
--   parent waits, and whether the parent waits for this child now.
-- * tasks.wait, tasks.waiting_for, tasks.waiting_progress: on a root that waits durably (no slot, no owner), what it
--   waits for ('children:all', 'children:any', 'jobs', 'signal:NAME'), the same for people, and the progress its
--   tree adds up to meanwhile (raised as its children report).
-- * job_dependencies: a job that starts only after others finished, and what it does when one of them fails.
-- * signals: named payloads sent to a job; each is taken once, by the wait step that consumed it.
-- * tree_changes: what the tree keeper still has to carry out, written in the same transaction as the change that
--   causes it (a child's change to mirror in its parent, a parent's pause or end to carry to its children, a finished
--   job's dependents to release, a waiting job to look at again). Queued again while queued, a row's version moves;
--   the keeper deletes a row only at the version it carried out, so a change made while it worked is not lost.
-- * events: two more kinds, 'waiting' (a job gave its slot back to wait for children, jobs or a signal) and
--   'signaled' (a signal was sent to it). SQLite cannot change a CHECK in place: the table is rebuilt, as in 0004.

ALTER TABLE tasks ADD COLUMN parent_job_id TEXT;
ALTER TABLE tasks ADD COLUMN child_job_id TEXT;
ALTER TABLE tasks ADD COLUMN wait TEXT;
ALTER TABLE tasks ADD COLUMN waiting_for TEXT;
ALTER TABLE tasks ADD COLUMN waiting_progress REAL;
ALTER TABLE tasks ADD COLUMN share REAL CHECK (share IS NULL OR share >= 0.0);
ALTER TABLE tasks ADD COLUMN awaited INTEGER NOT NULL DEFAULT 0 CHECK (awaited = 0 OR awaited = 1);

-- The link of a child job (the tree keeper mirrors a child into it).
CREATE UNIQUE INDEX tasks_link_of_child ON tasks (child_job_id) WHERE child_job_id IS NOT NULL;
-- The links of a parent's tree (cascades, show, remove).
CREATE INDEX tasks_links_by_root ON tasks (root_id) WHERE child_job_id IS NOT NULL;
-- The links a waiting parent waits for.
CREATE INDEX tasks_awaited_links ON tasks (root_id) WHERE awaited = 1;

CREATE TABLE job_dependencies (
    job_id TEXT NOT NULL,
    depends_on TEXT NOT NULL,
    -- What the job does when this dependency fails or is cancelled: it is cancelled, or it runs all the same.
    on_failure TEXT NOT NULL CHECK (on_failure = 'cancel' OR on_failure = 'run'),
    PRIMARY KEY (job_id, depends_on)
) STRICT, WITHOUT ROWID;

-- The dependents of a job that finished.
CREATE INDEX job_dependencies_by_dependency ON job_dependencies (depends_on);

CREATE TABLE signals (
    id INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL,
    name TEXT NOT NULL,
    payload BLOB,
    sent_at INTEGER NOT NULL,
    -- The wait step that took it (a signal is taken once), and when.
    consumed_by TEXT,
    consumed_at INTEGER
) STRICT;

-- A job's signals of a name, oldest first.
CREATE INDEX signals_by_job ON signals (job_id, name, id);

CREATE TABLE tree_changes (
    task_id TEXT NOT NULL,
    action TEXT NOT NULL CHECK (
        action = 'mirror' OR action = 'cancel-children' OR action = 'pause-children' OR action = 'resume-children'
        OR action = 'dependents' OR action = 'recount'),
    queued_at INTEGER NOT NULL,
    version INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, action)
) STRICT, WITHOUT ROWID;

CREATE TABLE events_v5 (
    id INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL,
    root_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (
        kind = 'created' OR kind = 'started' OR kind = 'step' OR kind = 'progress' OR kind = 'paused'
        OR kind = 'resumed' OR kind = 'checkpointed' OR kind = 'completed' OR kind = 'failed' OR kind = 'cancelled'
        OR kind = 'retried' OR kind = 'interrupted' OR kind = 'recovered' OR kind = 'scheduled' OR kind = 'sleeping'
        OR kind = 'waiting' OR kind = 'signaled'),
    at INTEGER NOT NULL,
    attempt INTEGER NOT NULL CHECK (attempt >= 1),
    progress REAL CHECK (progress IS NULL OR (progress >= 0.0 AND progress <= 1.0)),
    message TEXT,
    error_type TEXT
) STRICT;
INSERT INTO events_v5 (id, task_id, root_id, kind, at, attempt, progress, message, error_type)
SELECT id, task_id, root_id, kind, at, attempt, progress, message, error_type FROM events;
DROP TABLE events;
ALTER TABLE events_v5 RENAME TO events;
-- A root's history in order (history, show); deleting it with its root.
CREATE INDEX events_by_root ON events (root_id, id);
