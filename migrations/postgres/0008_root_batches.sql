-- Progression on PostgreSQL, schema 8: apply_roots, the executor's batch of a few roots' rows (new roots, changes of
-- stored roots) with their events, in one call that writes what apply_batch (migration 0007) writes for such a
-- batch: the same session mark, outcome, queued tree work, notification and commit before it answers, row by row
-- instead of in one statement of ten common table expressions over unnested arrays (whose fixed cost, for a batch of
-- one or two rows, was most of the call: with one job at a time, each job's start and end are such batches). A stored
-- root's own row is checked in its update (held by the batch's owner, or, for a job queued unowned, still unowned
-- with the status the writer read), the rule apply_batch applies by locking it first: the UPDATE takes the same row
-- lock and checks its condition on the row's latest version. The client sends the updates in the byte order of their
-- ids, the order in which apply_batch locks roots, so that two writers never wait for each other's rows in turn.

CREATE PROCEDURE apply_roots(
    p_owner text, p_session text, p_batch bigint, p_after bigint, p_acknowledged bigint, p_now bigint,
    p_channel text,
    i_id text[], i_parent_id text[], i_root_id text[], i_name text[], i_occurrence integer[], i_kind text[],
    i_input bytea[], i_idempotency_key text[], i_options text[], i_status text[], i_progress double precision[],
    i_step text[], i_weight double precision[], i_attempt integer[], i_interruptions integer[], i_error_type text[],
    i_error_description text[], i_result bytea[], i_checkpoint bytea[], i_owner_id text[], i_lease_expires_at bigint[],
    i_priority integer[], i_created_at bigint[], i_started_at bigint[], i_updated_at bigint[], i_finished_at bigint[],
    i_next_attempt_at bigint[], i_total double precision[], i_rate double precision[], i_version text[],
    u_id text[], u_guarded_status text[], u_mask integer[], u_status text[], u_progress double precision[],
    u_step text[], u_weight double precision[], u_attempt integer[], u_interruptions integer[], u_error_type text[],
    u_error_description text[], u_result bytea[], u_checkpoint bytea[], u_owner_id text[], u_priority integer[],
    u_started_at bigint[], u_updated_at bigint[], u_finished_at bigint[], u_next_attempt_at bigint[],
    u_total double precision[], u_rate double precision[], u_options text[], u_version text[],
    e_task_id text[], e_root_id text[], e_kind text[], e_at bigint[], e_attempt integer[],
    e_progress double precision[], e_message text[], e_error_type text[],
    INOUT r_applied boolean, INOUT r_rejected text[], INOUT r_conflicting text[])
LANGUAGE plpgsql AS $body$
DECLARE
    v_unwritten text[] := '{}';
    v_parent_job text;
    v_finished_at bigint;
    v_mask integer;
BEGIN
    PERFORM set_config('enable_seqscan', 'off', true);
    -- The mark's lock gives the transaction its id before any event's number is drawn (RootOutcomeCursor).
    r_applied := coalesce((SELECT m.batch FROM writer_marks m WHERE m.session = p_session FOR UPDATE), 0) = p_after;
    r_rejected := '{}';
    r_conflicting := '{}';
    IF NOT r_applied THEN
        RETURN;
    END IF;
    FOR i IN 1 .. coalesce(cardinality(i_id), 0) LOOP
        INSERT INTO tasks (id, parent_id, root_id, name, occurrence, kind, input, idempotency_key, options, status,
            progress, step, weight, attempt, interruptions, error_type, error_description, result, checkpoint, owner_id,
            lease_expires_at, priority, created_at, started_at, updated_at, finished_at, next_attempt_at, total, rate,
            version)
        VALUES (i_id[i], i_parent_id[i], i_root_id[i], i_name[i], i_occurrence[i], i_kind[i], i_input[i],
            i_idempotency_key[i], i_options[i], i_status[i], i_progress[i], i_step[i], i_weight[i], i_attempt[i],
            i_interruptions[i], i_error_type[i], i_error_description[i], i_result[i], i_checkpoint[i], i_owner_id[i],
            i_lease_expires_at[i], i_priority[i], i_created_at[i], i_started_at[i], i_updated_at[i], i_finished_at[i],
            i_next_attempt_at[i], i_total[i], i_rate[i], i_version[i])
        ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
            r_conflicting := r_conflicting || i_id[i];
            v_unwritten := v_unwritten || i_id[i];
        END IF;
    END LOOP;
    FOR i IN 1 .. coalesce(cardinality(u_id), 0) LOOP
        v_mask := u_mask[i];
        UPDATE tasks AS t SET
            status = CASE WHEN (v_mask & 1) <> 0 THEN u_status[i] ELSE t.status END,
            progress = CASE WHEN (v_mask & 2) <> 0 THEN u_progress[i] ELSE t.progress END,
            step = CASE WHEN (v_mask & 4) <> 0 THEN u_step[i] ELSE t.step END,
            weight = CASE WHEN (v_mask & 8) <> 0 THEN u_weight[i] ELSE t.weight END,
            attempt = CASE WHEN (v_mask & 16) <> 0 THEN u_attempt[i] ELSE t.attempt END,
            interruptions = CASE WHEN (v_mask & 32) <> 0 THEN u_interruptions[i] ELSE t.interruptions END,
            error_type = CASE WHEN (v_mask & 64) <> 0 THEN u_error_type[i] ELSE t.error_type END,
            error_description = CASE WHEN (v_mask & 64) <> 0 THEN u_error_description[i] ELSE t.error_description END,
            result = CASE WHEN (v_mask & 128) <> 0 THEN u_result[i] ELSE t.result END,
            checkpoint = CASE WHEN (v_mask & 256) <> 0 THEN u_checkpoint[i] ELSE t.checkpoint END,
            owner_id = CASE WHEN (v_mask & 512) <> 0 THEN u_owner_id[i] ELSE t.owner_id END,
            priority = CASE WHEN (v_mask & 1024) <> 0 THEN u_priority[i] ELSE t.priority END,
            started_at = CASE WHEN (v_mask & 2048) <> 0 THEN u_started_at[i] ELSE t.started_at END,
            updated_at = CASE WHEN (v_mask & 4096) <> 0 THEN u_updated_at[i] ELSE t.updated_at END,
            finished_at = CASE WHEN (v_mask & 8192) <> 0 THEN u_finished_at[i] ELSE t.finished_at END,
            next_attempt_at = CASE WHEN (v_mask & 16384) <> 0 THEN u_next_attempt_at[i] ELSE t.next_attempt_at END,
            total = CASE WHEN (v_mask & 32768) <> 0 THEN u_total[i] ELSE t.total END,
            rate = CASE WHEN (v_mask & 65536) <> 0 THEN u_rate[i] ELSE t.rate END,
            options = CASE WHEN (v_mask & 131072) <> 0 THEN u_options[i] ELSE t.options END,
            version = CASE WHEN (v_mask & 1048576) <> 0 THEN u_version[i] ELSE t.version END
        WHERE t.id = u_id[i] AND CASE WHEN u_guarded_status[i] IS NOT NULL
            THEN t.owner_id IS NULL AND t.status = u_guarded_status[i]
            ELSE t.owner_id = p_owner END
        RETURNING t.parent_job_id, t.finished_at INTO v_parent_job, v_finished_at;
        IF NOT FOUND THEN
            r_rejected := r_rejected || u_id[i];
            v_unwritten := v_unwritten || u_id[i];
        ELSE
            IF v_parent_job IS NOT NULL THEN
                INSERT INTO tree_changes (task_id, action, queued_at) VALUES (u_id[i], 'mirror', p_now)
                    ON CONFLICT (task_id, action) DO UPDATE SET version = tree_changes.version + 1;
            END IF;
            IF (v_mask & 1) <> 0 AND v_finished_at IS NOT NULL
                AND EXISTS (SELECT 1 FROM job_dependencies d WHERE d.depends_on = u_id[i])
            THEN
                INSERT INTO tree_changes (task_id, action, queued_at) VALUES (u_id[i], 'dependents', p_now)
                    ON CONFLICT (task_id, action) DO UPDATE SET version = tree_changes.version + 1;
            END IF;
        END IF;
    END LOOP;
    IF cardinality(e_task_id) > 0 THEN
        INSERT INTO events (task_id, root_id, kind, at, attempt, progress, message, error_type)
        SELECT e.task_id, e.root_id, e.kind, e.at, e.attempt, e.progress, e.message, e.error_type
        FROM unnest(e_task_id, e_root_id, e_kind, e_at, e_attempt, e_progress, e_message, e_error_type)
            WITH ORDINALITY AS e(task_id, root_id, kind, at, attempt, progress, message, error_type, n)
        WHERE NOT e.task_id = ANY(v_unwritten)
        ORDER BY e.n;
    END IF;
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
