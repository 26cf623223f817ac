-- Progression on PostgreSQL, schema 7: what SQLite's migration 0007 adds — the version a job began under, and each
-- owner's kinds' versions (see migrations/0007_job_versions.sql). apply_batch gains the inserts' and updates' versions
-- (after their rates, and after the updates' options; mask bit 1048576), so that the start that records a job's
-- version stays one round trip. The new signature is a procedure of its own: the one of migration 0005 stays, so that
-- a worker of the previous release still running during a rolling deploy goes on writing through it (its rows get
-- no version: any version continues them). A later migration drops it.

ALTER TABLE tasks ADD COLUMN version text COLLATE "C";
ALTER TABLE owners ADD COLUMN versions text;

CREATE PROCEDURE apply_batch(
    p_owner text, p_session text, p_batch bigint, p_after bigint, p_acknowledged bigint, p_now bigint,
    p_channel text,
    p_roots text[], p_new_roots text[], p_guarded text[], p_guarded_status text[],
    i_id text[], i_parent_id text[], i_root_id text[], i_name text[], i_occurrence integer[], i_kind text[],
    i_input bytea[], i_idempotency_key text[], i_options text[], i_status text[], i_progress double precision[],
    i_step text[], i_weight double precision[], i_attempt integer[], i_interruptions integer[], i_error_type text[],
    i_error_description text[], i_result bytea[], i_checkpoint bytea[], i_owner_id text[], i_lease_expires_at bigint[],
    i_priority integer[], i_created_at bigint[], i_started_at bigint[], i_updated_at bigint[], i_finished_at bigint[],
    i_next_attempt_at bigint[], i_total double precision[], i_rate double precision[], i_version text[],
    u_id text[], u_root_id text[], u_mask integer[], u_status text[], u_progress double precision[], u_step text[],
    u_weight double precision[], u_attempt integer[], u_interruptions integer[], u_error_type text[],
    u_error_description text[], u_result bytea[], u_checkpoint bytea[], u_owner_id text[], u_priority integer[],
    u_started_at bigint[], u_updated_at bigint[], u_finished_at bigint[], u_next_attempt_at bigint[],
    u_total double precision[], u_rate double precision[], u_options text[], u_version text[],
    e_task_id text[], e_root_id text[], e_kind text[], e_at bigint[], e_attempt integer[],
    e_progress double precision[], e_message text[], e_error_type text[],
    INOUT r_applied boolean, INOUT r_rejected text[], INOUT r_conflicting text[])
LANGUAGE plpgsql AS $body$
BEGIN
    PERFORM set_config('enable_seqscan', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true);
    r_applied := coalesce((SELECT m.batch FROM writer_marks m WHERE m.session = p_session FOR UPDATE), 0) = p_after;
    IF NOT r_applied THEN
        r_rejected := '{}';
        r_conflicting := '{}';
        RETURN;
    END IF;
    WITH held AS MATERIALIZED (
        SELECT t.id FROM tasks t
        WHERE t.id = ANY(p_roots) AND CASE WHEN t.id = ANY(p_guarded)
            THEN t.owner_id IS NULL AND (t.id, t.status) IN (SELECT * FROM unnest(p_guarded, p_guarded_status))
            ELSE t.owner_id = p_owner END
        ORDER BY t.id FOR NO KEY UPDATE),
    allowed AS MATERIALIZED (SELECT h.id FROM held h UNION ALL SELECT unnest(p_new_roots)),
    ins AS (
        INSERT INTO tasks (id, parent_id, root_id, name, occurrence, kind, input, idempotency_key, options, status,
            progress, step, weight, attempt, interruptions, error_type, error_description, result, checkpoint, owner_id,
            lease_expires_at, priority, created_at, started_at, updated_at, finished_at, next_attempt_at, total, rate,
            version)
        SELECT * FROM unnest(i_id, i_parent_id, i_root_id, i_name, i_occurrence, i_kind, i_input, i_idempotency_key,
            i_options, i_status, i_progress, i_step, i_weight, i_attempt, i_interruptions, i_error_type,
            i_error_description, i_result, i_checkpoint, i_owner_id, i_lease_expires_at, i_priority, i_created_at,
            i_started_at, i_updated_at, i_finished_at, i_next_attempt_at, i_total, i_rate, i_version)
            AS v(id, parent_id, root_id, name, occurrence, kind, input, idempotency_key, options, status, progress,
                step, weight, attempt, interruptions, error_type, error_description, result, checkpoint, owner_id,
                lease_expires_at, priority, created_at, started_at, updated_at, finished_at, next_attempt_at, total,
                rate, version)
        WHERE v.root_id IN (SELECT a.id FROM allowed a)
        ON CONFLICT DO NOTHING
        RETURNING tasks.id),
    upd AS (
        UPDATE tasks AS t SET
            status = CASE WHEN (u.mask & 1) <> 0 THEN u.status ELSE t.status END,
            progress = CASE WHEN (u.mask & 2) <> 0 THEN u.progress ELSE t.progress END,
            step = CASE WHEN (u.mask & 4) <> 0 THEN u.step ELSE t.step END,
            weight = CASE WHEN (u.mask & 8) <> 0 THEN u.weight ELSE t.weight END,
            attempt = CASE WHEN (u.mask & 16) <> 0 THEN u.attempt ELSE t.attempt END,
            interruptions = CASE WHEN (u.mask & 32) <> 0 THEN u.interruptions ELSE t.interruptions END,
            error_type = CASE WHEN (u.mask & 64) <> 0 THEN u.error_type ELSE t.error_type END,
            error_description = CASE WHEN (u.mask & 64) <> 0 THEN u.error_description ELSE t.error_description END,
            result = CASE WHEN (u.mask & 128) <> 0 THEN u.result ELSE t.result END,
            checkpoint = CASE WHEN (u.mask & 256) <> 0 THEN u.checkpoint ELSE t.checkpoint END,
            owner_id = CASE WHEN (u.mask & 512) <> 0 THEN u.owner_id ELSE t.owner_id END,
            priority = CASE WHEN (u.mask & 1024) <> 0 THEN u.priority ELSE t.priority END,
            started_at = CASE WHEN (u.mask & 2048) <> 0 THEN u.started_at ELSE t.started_at END,
            updated_at = CASE WHEN (u.mask & 4096) <> 0 THEN u.updated_at ELSE t.updated_at END,
            finished_at = CASE WHEN (u.mask & 8192) <> 0 THEN u.finished_at ELSE t.finished_at END,
            next_attempt_at = CASE WHEN (u.mask & 16384) <> 0 THEN u.next_attempt_at ELSE t.next_attempt_at END,
            total = CASE WHEN (u.mask & 32768) <> 0 THEN u.total ELSE t.total END,
            rate = CASE WHEN (u.mask & 65536) <> 0 THEN u.rate ELSE t.rate END,
            options = CASE WHEN (u.mask & 131072) <> 0 THEN u.options ELSE t.options END,
            version = CASE WHEN (u.mask & 1048576) <> 0 THEN u.version ELSE t.version END
        FROM unnest(u_id, u_root_id, u_mask, u_status, u_progress, u_step, u_weight, u_attempt, u_interruptions,
            u_error_type, u_error_description, u_result, u_checkpoint, u_owner_id, u_priority, u_started_at,
            u_updated_at, u_finished_at, u_next_attempt_at, u_total, u_rate, u_options, u_version)
            AS u(id, root_id, mask, status, progress, step, weight, attempt, interruptions, error_type,
                error_description, result, checkpoint, owner_id, priority, started_at, updated_at, finished_at,
                next_attempt_at, total, rate, options, version)
        WHERE t.id = u.id AND u.root_id IN (SELECT a.id FROM allowed a)
        RETURNING t.id, t.parent_job_id, t.finished_at, u.mask),
    unwritten AS MATERIALIZED (
        SELECT r.id FROM unnest(i_id) AS r(id) WHERE r.id NOT IN (SELECT x.id FROM ins x)
        UNION ALL
        SELECT r.id FROM unnest(u_id) AS r(id) WHERE r.id NOT IN (SELECT x.id FROM upd x)),
    tree AS (
        INSERT INTO tree_changes (task_id, action, queued_at)
        SELECT x.id, 'mirror', p_now FROM upd x WHERE x.parent_job_id IS NOT NULL
        UNION ALL
        SELECT x.id, 'dependents', p_now FROM upd x
        WHERE (x.mask & 1) <> 0 AND x.finished_at IS NOT NULL
            AND EXISTS (SELECT 1 FROM job_dependencies d WHERE d.depends_on = x.id)
        ON CONFLICT (task_id, action) DO UPDATE SET version = tree_changes.version + 1),
    ev AS (
        INSERT INTO events (task_id, root_id, kind, at, attempt, progress, message, error_type)
        SELECT e.task_id, e.root_id, e.kind, e.at, e.attempt, e.progress, e.message, e.error_type
        FROM unnest(e_task_id, e_root_id, e_kind, e_at, e_attempt, e_progress, e_message, e_error_type)
            WITH ORDINALITY AS e(task_id, root_id, kind, at, attempt, progress, message, error_type, n)
        WHERE e.task_id NOT IN (SELECT w.id FROM unwritten w)
        ORDER BY e.n)
    SELECT
        ARRAY(SELECT r.id FROM unnest(i_id, i_root_id) WITH ORDINALITY AS r(id, root_id, n)
            WHERE r.root_id NOT IN (SELECT a.id FROM allowed a) ORDER BY r.n)
        || ARRAY(SELECT r.id FROM unnest(u_id) WITH ORDINALITY AS r(id, n)
            WHERE r.id NOT IN (SELECT x.id FROM upd x) ORDER BY r.n),
        ARRAY(SELECT r.id FROM unnest(i_id, i_root_id) WITH ORDINALITY AS r(id, root_id, n)
            WHERE r.root_id IN (SELECT a.id FROM allowed a) AND r.id NOT IN (SELECT x.id FROM ins x) ORDER BY r.n)
    INTO r_rejected, r_conflicting;
    INSERT INTO writer_marks (session, batch, written_at) VALUES (p_session, p_batch, p_now)
        ON CONFLICT (session) DO UPDATE SET batch = EXCLUDED.batch, written_at = EXCLUDED.written_at
        WHERE writer_marks.batch < EXCLUDED.batch;
    IF cardinality(r_rejected) > 0 OR cardinality(r_conflicting) > 0 THEN
        INSERT INTO writer_outcomes (session, batch, rejected, conflicting)
            VALUES (p_session, p_batch, r_rejected, r_conflicting);
    END IF;
    DELETE FROM writer_outcomes o WHERE o.session = p_session AND o.batch <= p_acknowledged;
    PERFORM pg_notify(p_channel, '');
    COMMIT;
END
$body$;
