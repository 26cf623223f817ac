-- Progression on PostgreSQL, schema 6: what SQLite's migration 0006 adds — work that one executor of the fleet does
-- for all of them, in turns, and each owner's slots (see migrations/0006_fleet_duties.sql).

ALTER TABLE owners ADD COLUMN slots integer CHECK (slots IS NULL OR slots >= 0);

CREATE TABLE fleet_duties (
    name text COLLATE "C" PRIMARY KEY,
    next_at bigint NOT NULL,
    owner_id text COLLATE "C" NOT NULL,
    taken_at bigint NOT NULL
);
