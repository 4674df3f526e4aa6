-- +goose Up
-- member_erasures is the record of an erased member: the id and when, nothing else. An erased
-- id is retired for good: every write naming it is a no-op (the writers anti-join this table
-- after taking the erasure fence, package erasure) and every token naming it answers 401.
CREATE TABLE member_erasures (
    member_id bigint PRIMARY KEY,
    erased_at timestamptz NOT NULL
);

-- playback_forgotten is a tombstone per forgotten item (DELETE /v1/playback/{id}?forget=true):
-- a report made at or before forgotten_at, still in a buffer or a spill file, must not create
-- the row again, so the flush anti-joins it. A tombstone is pruned once no such report can
-- still be waiting (erasure.TombstoneKind, by forgotten_at).
CREATE TABLE playback_forgotten (
    member_id    bigint      NOT NULL,
    media_id     bigint      NOT NULL,
    forgotten_at timestamptz NOT NULL,
    PRIMARY KEY (member_id, media_id)
);
CREATE INDEX playback_forgotten_at_idx ON playback_forgotten (forgotten_at);

-- history_paused holds the members whose history is paused (PUT /v1/me/settings): while a row
-- is here, the flush stores nothing of theirs.
CREATE TABLE history_paused (
    member_id bigint PRIMARY KEY,
    paused_at timestamptz NOT NULL
);

-- playhead_erasure_fence is the one statement every writer naming a member runs first in its
-- transaction: the shared side of the erasure lock (the erasure takes it exclusively), so a
-- writer's next statement, in READ COMMITTED, reads member_erasures after any erasure that
-- held the lock has committed. The key is a fixed number chosen for this lock alone.
CREATE FUNCTION playhead_erasure_fence() RETURNS void
LANGUAGE sql VOLATILE
RETURN pg_advisory_xact_lock_shared(4707270001);

-- playhead_erasure_lock is the erasure's side: it waits for every writer in flight and holds
-- new ones back until the erasure commits.
CREATE FUNCTION playhead_erasure_lock() RETURNS void
LANGUAGE sql VOLATILE
RETURN pg_advisory_xact_lock(4707270001);

-- members_refuse_erased keeps an erased id out of members: media creation, tus uploads and
-- imports all create their owner's row first (media.EnsureMember, whose INSERT fires this even
-- when the row exists), so none of them can name an erased member. The fence is taken here and
-- the record read in a statement of its own: a PL/pgSQL statement takes a new snapshot in READ
-- COMMITTED, after the lock was granted.
-- +goose StatementBegin
CREATE FUNCTION playhead_members_refuse_erased() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM playhead_erasure_fence();
    IF EXISTS (SELECT 1 FROM member_erasures WHERE member_id = NEW.id) THEN
        RAISE EXCEPTION 'member % is erased', NEW.id USING ERRCODE = 'PHERA';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER members_refuse_erased BEFORE INSERT ON members
FOR EACH ROW EXECUTE FUNCTION playhead_members_refuse_erased();

-- creator_refuse_erased keeps an erased id out of the created_by of captions and webhook
-- endpoints, which reference no members row: a caption POST or an endpoint registration whose
-- token passed auth before the erasure (a node that has not heard of it, or a track's files
-- still being written to the object store) would otherwise store the id after the erasure job
-- cleared that column. Only inserts: the erasure job's own update to 0 needs no fence, and
-- taking it there could wait behind a waiting erasure while holding what a flush waits for.
-- +goose StatementBegin
CREATE FUNCTION playhead_creator_refuse_erased() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM playhead_erasure_fence();
    IF EXISTS (SELECT 1 FROM member_erasures WHERE member_id = NEW.created_by) THEN
        RAISE EXCEPTION 'member % is erased', NEW.created_by USING ERRCODE = 'PHERA';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER captions_refuse_erased BEFORE INSERT ON captions
FOR EACH ROW EXECUTE FUNCTION playhead_creator_refuse_erased();
CREATE TRIGGER webhook_endpoints_refuse_erased BEFORE INSERT ON webhook_endpoints
FOR EACH ROW EXECUTE FUNCTION playhead_creator_refuse_erased();

-- playhead_refuse_write raises when a write of one row naming p_member must not happen: PHERA
-- when the member is erased, PHPAU when their history is paused, unless p_existing_ok and
-- their playback row of p_media exists (a hide still changes a row from before the pause). The
-- open and the hide run it after the fence, as the statement before their INSERT … VALUES in
-- the same implicit transaction, which the error aborts. (An INSERT … SELECT … WHERE would
-- hide the member from a sharded plan: see playback's Citus test.)
-- +goose StatementBegin
CREATE FUNCTION playhead_refuse_write(p_member bigint, p_media bigint, p_existing_ok boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM member_erasures WHERE member_id = p_member) THEN
        RAISE EXCEPTION 'member % is erased', p_member USING ERRCODE = 'PHERA';
    END IF;
    IF EXISTS (SELECT 1 FROM history_paused WHERE member_id = p_member)
       AND NOT (p_existing_ok AND EXISTS (SELECT 1 FROM playback WHERE member_id = p_member AND media_id = p_media)) THEN
        RAISE EXCEPTION 'history of member % is paused', p_member USING ERRCODE = 'PHPAU';
    END IF;
END
$$;
-- +goose StatementEnd

-- An import outlives an erased creator (its collections are every member's); its created_by,
-- a reference to members, is cleared. (Webhook endpoints and captions keep theirs as 0: those
-- columns reference nothing.)
ALTER TABLE imports ALTER COLUMN created_by DROP NOT NULL;

-- +goose Down
-- Fails while an import has no creator (its admin was erased): there is no one to name.
ALTER TABLE imports ALTER COLUMN created_by SET NOT NULL;
DROP FUNCTION playhead_refuse_write(bigint, bigint, boolean);
DROP TRIGGER webhook_endpoints_refuse_erased ON webhook_endpoints;
DROP TRIGGER captions_refuse_erased ON captions;
DROP FUNCTION playhead_creator_refuse_erased();
DROP TRIGGER members_refuse_erased ON members;
DROP FUNCTION playhead_members_refuse_erased();
DROP FUNCTION playhead_erasure_lock();
DROP FUNCTION playhead_erasure_fence();
DROP TABLE history_paused;
DROP TABLE playback_forgotten;
DROP TABLE member_erasures;
