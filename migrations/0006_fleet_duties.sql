-- Progression schema 6: work that one executor of the fleet does for all of them, in turns (the retention of finished
-- jobs, the fleet's gauges). An executor takes a duty's turn when it is due, or renews its own, by moving next_at
-- forward in one conditional write: of executors that try at once, one succeeds, and the others wait for a later turn.
-- And each owner's slots (its maxConcurrentTasks), for the gauges of free and used slots.

ALTER TABLE owners ADD COLUMN slots INTEGER CHECK (slots IS NULL OR slots >= 0);

CREATE TABLE fleet_duties (
    name TEXT PRIMARY KEY NOT NULL,
    -- When the next turn is due (milliseconds since the Unix epoch).
    next_at INTEGER NOT NULL,
    -- The executor that took the last turn, and when.
    owner_id TEXT NOT NULL,
    taken_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
