-- Progression schema 7: versions across deploys (issue 37). A job of a kind that declares a version records the
-- version it began under (of the worker that first started it, written with that start); a worker continues it only
-- under a version that can (the same, or one its kind declares it continues). NULL: any version continues it.
-- Each owner records its kinds' versions (a JSON object by kind: name, continues, otherwise), so that doctor can say
-- which versions wait for which workers.

ALTER TABLE tasks ADD COLUMN version TEXT;
ALTER TABLE owners ADD COLUMN versions TEXT;
