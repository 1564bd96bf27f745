-- The schema of github.com/electkit/election/backend/postgres, version 1,
-- in the schema "election" (the default; Schema(name) gives it for another
-- name). An Elector creates it on first use unless
-- election.schema_version() already returns 1, so a DBA may run this file
-- once and grant the electing role only what it uses:
--   GRANT USAGE ON SCHEMA election TO r;
--   GRANT SELECT, INSERT, UPDATE, DELETE ON election.elections, election.candidates TO r;
--   GRANT USAGE ON SEQUENCE election.tokens, election.arrivals TO r;
--   GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA election TO r;
-- Every time is the server's (clock_timestamp()); a lease ends when the
-- server's clock passes its expires.
CREATE SCHEMA IF NOT EXISTS election;

-- Tokens: every leadership of every election of the schema takes the next
-- value in the statement that claims it. The sequence belongs to no
-- column, so TRUNCATE ... RESTART IDENTITY does not rewind it.
CREATE SEQUENCE IF NOT EXISTS election.tokens;
-- Arrivals order the candidates of equal priority: first come, first served.
CREATE SEQUENCE IF NOT EXISTS election.arrivals;

-- One row per election: its current leadership (leader NULL: none), the
-- token of the latest one, and a hand-over in progress (successor).
CREATE TABLE IF NOT EXISTS election.elections (
	name            text PRIMARY KEY,
	token           bigint NOT NULL DEFAULT 0,
	leader          text,
	value           bytea,
	priority        bigint,
	expires         timestamptz,
	successor       text,
	successor_until timestamptz,
	request_to      text,
	request_token   bigint,
	request_error   text,
	request_none    boolean
);

-- One row per waiting candidate, kept alive by its heartbeats (expires);
-- channel is the LISTEN channel that wakes it.
CREATE TABLE IF NOT EXISTS election.candidates (
	arrival  bigint PRIMARY KEY,
	name     text NOT NULL,
	id       text NOT NULL,
	value    bytea NOT NULL,
	priority bigint NOT NULL,
	since    timestamptz NOT NULL,
	expires  timestamptz NOT NULL,
	channel  text NOT NULL
);
CREATE INDEX IF NOT EXISTS candidates_queue ON election.candidates (name, priority DESC, arrival);

-- A candidate's row deleted by anyone but the candidate itself (an
-- operator, or the cleanup of rows whose heartbeats stopped) wakes it, so
-- that it queues again at once.
CREATE OR REPLACE FUNCTION election.candidate_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF coalesce(current_setting('election.quiet', true), '') <> 'on' THEN
		PERFORM pg_notify(OLD.channel, '');
	END IF;
	RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER deleted AFTER DELETE ON election.candidates
	FOR EACH ROW EXECUTE FUNCTION election.candidate_deleted();

-- The channel that every change of an election's row is announced on
-- (observers and the leader listen to it), and the one of the whole schema
-- (a TRUNCATE).
CREATE OR REPLACE FUNCTION election.channel(p_name text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'el_' || md5('election/' || p_name) $$;

-- wake_next wakes the one candidate that may claim election p_name now,
-- if it has no valid leader: the successor a hand-over named while it
-- waits, else the first in line.
CREATE OR REPLACE FUNCTION election.wake_next(p_name text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	e election.elections;
	ch text;
	t timestamptz := clock_timestamp();
BEGIN
	SELECT * INTO e FROM election.elections WHERE name = p_name;
	IF FOUND AND e.leader IS NOT NULL AND e.expires > t THEN
		RETURN;
	END IF;
	IF FOUND AND e.successor IS NOT NULL AND e.successor_until > t THEN
		SELECT channel INTO ch FROM election.candidates
			WHERE name = p_name AND id = e.successor AND expires > t ORDER BY arrival LIMIT 1;
	END IF;
	IF ch IS NULL THEN
		SELECT channel INTO ch FROM election.candidates
			WHERE name = p_name AND expires > t ORDER BY priority DESC, arrival LIMIT 1;
	END IF;
	IF ch IS NOT NULL THEN
		PERFORM pg_notify(ch, '');
	END IF;
END $$;

-- Announces every change of an election's row but a leader's renewal
-- (which sets election.quiet) on the election's channel: claims, releases,
-- and an operator's INSERT, UPDATE, DELETE or TRUNCATE; and wakes the
-- candidate that may claim it now, if any (wake_next).
CREATE OR REPLACE FUNCTION election.changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	n text;
BEGIN
	IF TG_OP = 'TRUNCATE' THEN
		PERFORM pg_notify('el_' || md5('election'), '');
		FOR n IN SELECT DISTINCT name FROM election.candidates LOOP
			PERFORM election.wake_next(n);
		END LOOP;
		RETURN NULL;
	END IF;
	IF coalesce(current_setting('election.quiet', true), '') = 'on' THEN
		RETURN NULL;
	END IF;
	IF TG_OP IN ('UPDATE', 'DELETE') THEN
		PERFORM pg_notify(election.channel(OLD.name), '');
		PERFORM election.wake_next(OLD.name);
	END IF;
	IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.name <> OLD.name) THEN
		PERFORM pg_notify(election.channel(NEW.name), '');
		PERFORM election.wake_next(NEW.name);
	END IF;
	RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER changed AFTER INSERT OR UPDATE OR DELETE ON election.elections
	FOR EACH ROW EXECUTE FUNCTION election.changed();
CREATE OR REPLACE TRIGGER truncated AFTER TRUNCATE ON election.elections
	FOR EACH STATEMENT EXECUTE FUNCTION election.changed();

-- register queues a new candidate and returns its arrival. Rows whose
-- heartbeats stopped are removed on the way.
CREATE OR REPLACE FUNCTION election.register(p_name text, p_id text, p_value bytea, p_priority bigint,
	p_ttl interval, p_channel text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	a bigint := nextval('election.arrivals');
	t timestamptz := clock_timestamp();
BEGIN
	DELETE FROM election.candidates WHERE name = p_name AND expires < t;
	INSERT INTO election.candidates (arrival, name, id, value, priority, since, expires, channel)
		VALUES (a, p_name, p_id, coalesce(p_value, ''::bytea), p_priority, t, t + p_ttl, p_channel);
	RETURN a;
END $$;

-- campaign is one attempt of a waiting candidate: its heartbeat, and its
-- claim if the election has no valid leader and it is the first in line
-- (the highest priority, then the earliest arrival, among the candidates
-- whose heartbeats are current) or the named successor of a hand-over.
-- state: 'leader' (token is the new leadership's), 'wait' (wait_ms: until
-- the leader's lease or the hand-over lapses, when this candidate is
-- first), or 'gone' (its row was removed: register again).
CREATE OR REPLACE FUNCTION election.campaign(p_name text, p_arrival bigint, p_ttl interval,
	OUT state text, OUT token bigint, OUT wait_ms double precision, OUT first boolean)
LANGUAGE plpgsql AS $$
DECLARE
	me election.candidates;
	e election.elections;
	t timestamptz;
	locked boolean := false;
BEGIN
	UPDATE election.candidates SET expires = clock_timestamp() + p_ttl
		WHERE arrival = p_arrival AND name = p_name RETURNING * INTO me;
	IF NOT FOUND THEN
		state := 'gone';
		RETURN;
	END IF;
	LOOP
		IF locked THEN
			SELECT * INTO e FROM election.elections WHERE name = p_name FOR UPDATE;
		ELSE
			SELECT * INTO e FROM election.elections WHERE name = p_name;
		END IF;
		IF NOT FOUND THEN
			INSERT INTO election.elections (name) VALUES (p_name) ON CONFLICT DO NOTHING;
			CONTINUE;
		END IF;
		t := clock_timestamp();
		first := NOT EXISTS (SELECT 1 FROM election.candidates c
			WHERE c.name = p_name AND c.expires > t AND c.arrival <> p_arrival
			AND (c.priority > me.priority OR (c.priority = me.priority AND c.arrival < me.arrival)));
		state := 'wait';
		IF e.leader IS NOT NULL AND e.expires > t THEN
			wait_ms := extract(epoch FROM e.expires - t) * 1000;
			RETURN;
		END IF;
		IF e.successor IS NOT NULL AND e.successor_until > t THEN
			IF e.successor <> me.id THEN
				wait_ms := extract(epoch FROM e.successor_until - t) * 1000;
				RETURN;
			END IF;
		ELSIF NOT first THEN
			RETURN;
		END IF;
		EXIT WHEN locked;
		locked := true; -- check again under the row lock, then claim
	END LOOP;
	UPDATE election.elections SET token = greatest(nextval('election.tokens'), e.token + 1),
		leader = me.id, value = me.value, priority = me.priority, expires = clock_timestamp() + p_ttl,
		successor = NULL, successor_until = NULL,
		request_to = NULL, request_token = NULL, request_error = NULL, request_none = NULL
		WHERE name = p_name RETURNING elections.token INTO token;
	PERFORM set_config('election.quiet', 'on', true);
	DELETE FROM election.candidates WHERE arrival = p_arrival;
	PERFORM set_config('election.quiet', 'off', true);
	state := 'leader';
	wait_ms := NULL;
END $$;

-- renew extends the lease of leadership p_token. state: 'ok', 'lost' (the
-- row holds another leadership or none), 'expired' (the lease lapsed on
-- the server's clock; it is not revived), or, with p_preempt set,
-- 'preempt' (successor: a candidate of higher priority has waited
-- p_preempt; the lease is left as it is for the leader to hand over).
-- preempt_ms: until the first such candidate will have waited p_preempt.
CREATE OR REPLACE FUNCTION election.renew(p_name text, p_token bigint, p_ttl interval, p_preempt interval,
	OUT state text, OUT successor text, OUT preempt_ms double precision, OUT request_to text)
LANGUAGE plpgsql AS $$
DECLARE
	e election.elections;
	c election.candidates;
	t timestamptz;
BEGIN
	SELECT * INTO e FROM election.elections WHERE name = p_name FOR UPDATE;
	IF NOT FOUND OR e.leader IS NULL OR e.token <> p_token THEN
		state := 'lost';
		RETURN;
	END IF;
	t := clock_timestamp();
	IF e.expires IS NULL OR e.expires <= t THEN
		state := 'expired';
		RETURN;
	END IF;
	IF p_preempt IS NOT NULL THEN
		SELECT * INTO c FROM election.candidates
			WHERE name = p_name AND expires > t AND priority > e.priority
			ORDER BY priority DESC, arrival LIMIT 1;
		IF FOUND THEN
			IF c.since + p_preempt <= t THEN
				state := 'preempt';
				successor := c.id;
				RETURN;
			END IF;
			preempt_ms := extract(epoch FROM c.since + p_preempt - t) * 1000;
		END IF;
	END IF;
	PERFORM set_config('election.quiet', 'on', true);
	UPDATE election.elections SET expires = clock_timestamp() + p_ttl WHERE name = p_name;
	PERFORM set_config('election.quiet', 'off', true);
	state := 'ok';
	IF e.request_token = p_token AND e.request_error IS NULL THEN
		request_to := e.request_to;
	END IF;
END $$;

-- request_transfer asks leadership p_token of election p_name to hand
-- itself to p_to ('' for the first in line): the leader hears of it by
-- the trigger's notification, and answers in request_error if it cannot.
-- It returns false if p_token is not the current leadership.
CREATE OR REPLACE FUNCTION election.request_transfer(p_name text, p_token bigint, p_to text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE election.elections SET request_to = p_to, request_token = p_token, request_error = NULL, request_none = NULL
		WHERE name = p_name AND token = p_token AND leader IS NOT NULL AND expires > clock_timestamp();
	RETURN FOUND;
END $$;

-- answer_transfer is the leader's answer to a request it cannot honour.
CREATE OR REPLACE FUNCTION election.answer_transfer(p_name text, p_token bigint, p_error text, p_none boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE election.elections SET request_error = p_error, request_none = p_none
		WHERE name = p_name AND request_token = p_token;
END $$;

-- release ends leadership p_token, naming p_successor as the only one
-- that may claim until p_hold has passed if it waits; the trigger wakes
-- the one candidate that leads next. released is false if p_token was not
-- the current leadership.
CREATE OR REPLACE FUNCTION election.release(p_name text, p_token bigint, p_successor text, p_hold interval,
	OUT released boolean, OUT successor text)
LANGUAGE plpgsql AS $$
DECLARE
	e election.elections;
	c election.candidates;
	t timestamptz;
BEGIN
	released := false;
	SELECT * INTO e FROM election.elections WHERE name = p_name FOR UPDATE;
	IF NOT FOUND OR e.leader IS NULL OR e.token <> p_token THEN
		RETURN;
	END IF;
	t := clock_timestamp();
	IF p_successor IS NOT NULL THEN
		SELECT * INTO c FROM election.candidates
			WHERE name = p_name AND id = p_successor AND expires > t ORDER BY arrival LIMIT 1;
		IF FOUND THEN
			successor := c.id;
		END IF;
	END IF;
	UPDATE election.elections SET leader = NULL, value = NULL, priority = NULL, expires = NULL,
		request_to = NULL, request_token = NULL, request_error = NULL, request_none = NULL,
		successor = release.successor,
		successor_until = CASE WHEN release.successor IS NULL THEN NULL ELSE t + p_hold END
		WHERE name = p_name;
	released := true;
END $$;

-- withdraw removes a waiting candidate; if it was first in line, the one
-- now first is woken.
CREATE OR REPLACE FUNCTION election.withdraw(p_name text, p_arrival bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	me election.candidates;
	c election.candidates;
BEGIN
	PERFORM set_config('election.quiet', 'on', true);
	DELETE FROM election.candidates WHERE arrival = p_arrival AND name = p_name RETURNING * INTO me;
	PERFORM set_config('election.quiet', 'off', true);
	IF NOT FOUND THEN
		RETURN;
	END IF;
	SELECT * INTO c FROM election.candidates WHERE name = p_name AND expires > clock_timestamp()
		ORDER BY priority DESC, arrival LIMIT 1;
	IF FOUND AND (me.priority > c.priority OR (me.priority = c.priority AND me.arrival < c.arrival)) THEN
		PERFORM pg_notify(c.channel, '');
	END IF;
END $$;

-- fence returns true if p_token is the current, unexpired leadership of
-- election p_name, and raises SQLSTATE EL001 otherwise. It holds a share
-- lock on the election's row until the calling transaction ends, so no
-- other candidate can claim the election (nor the leader renew) before
-- then: a write fenced by it commits while its leadership is current, or
-- not at all.
CREATE OR REPLACE FUNCTION election.fence(p_name text, p_token bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	e election.elections;
BEGIN
	SELECT * INTO e FROM election.elections WHERE name = p_name FOR SHARE;
	IF NOT FOUND OR e.leader IS NULL OR e.token <> p_token OR e.expires <= clock_timestamp() THEN
		RAISE EXCEPTION 'election %: token % is not its current leadership (current token %, leader %)',
			p_name, p_token, coalesce(e.token, 0), coalesce(e.leader, 'none')
			USING ERRCODE = 'EL001';
	END IF;
	RETURN true;
END $$;

-- The version of this schema; an Elector skips the statements above when
-- it returns 1.
CREATE OR REPLACE FUNCTION election.schema_version() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 1 $$;
