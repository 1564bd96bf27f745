package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

// permanent reports whether err is one that waiting does not cure: the
// server refused the statement itself (a permission revoked, the schema,
// a table or a function dropped, a role that cannot log in). Lost
// connections, canceled statements (statement_timeout, lock_timeout,
// pg_cancel_backend), a server shutting down or in recovery are retried.
func permanent(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) != 5 {
		return false
	}
	switch pe.Code[:2] {
	case "42", // syntax error or access rule violation: 42501 insufficient_privilege, 42P01, 42883
		"3F", // invalid schema name
		"28", // invalid authorization
		"0A", // feature not supported
		"22": // data exception
		return true
	}
	return false
}

// register queues a candidate and returns its arrival.
func (e *Elector) register(ctx context.Context, channel string) (int64, error) {
	e.statements.Add(1)
	var a int64
	err := e.pool.QueryRow(ctx, "SELECT "+e.schema+".register($1, $2, $3, $4, $5::bigint * interval '1 millisecond', $6)",
		e.name, e.o.ID, e.o.Value, e.o.Priority, e.ttlMS(), channel).Scan(&a)
	if err != nil {
		return 0, e.wrap("registering the candidate", err)
	}
	return a, nil
}

type attemptResult struct {
	state  string
	token  int64
	waitMS *float64
	first  bool
}

// attempt is one heartbeat and, if it may, claim of the candidate of
// arrival.
func (e *Elector) attempt(ctx context.Context, arrival int64) (attemptResult, error) {
	e.statements.Add(1)
	var (
		r     attemptResult
		token *int64
		first *bool
	)
	err := e.pool.QueryRow(ctx, "SELECT state, token, wait_ms, first FROM "+e.schema+".campaign($1, $2, $3::bigint * interval '1 millisecond')",
		e.name, arrival, e.ttlMS()).Scan(&r.state, &token, &r.waitMS, &first)
	if err != nil {
		return r, e.wrap("campaigning", err)
	}
	if token != nil {
		r.token = *token
	}
	r.first = first != nil && *first
	if r.state == "leader" && r.token <= 0 {
		return r, fmt.Errorf("postgres election %q: the claim returned token %d", e.name, r.token)
	}
	return r, nil
}

type renewResult struct {
	state     string
	successor *string
	preemptMS *float64
	requestTo *string // a transfer requested (RequestTransfer): its target, "" for the first in line
}

// renew extends the lease of leadership token.
func (e *Elector) renew(ctx context.Context, token int64) (renewResult, error) {
	e.statements.Add(1)
	var (
		r       renewResult
		preempt *int64
	)
	if e.o.PreemptAfter > 0 {
		ms := e.o.PreemptAfter.Milliseconds()
		preempt = &ms
	}
	err := e.pool.QueryRow(ctx, "SELECT state, successor, preempt_ms, request_to FROM "+e.schema+".renew($1, $2, $3::bigint * interval '1 millisecond', $4::bigint * interval '1 millisecond')",
		e.name, token, e.ttlMS(), preempt).Scan(&r.state, &r.successor, &r.preemptMS, &r.requestTo)
	if err != nil {
		return r, e.wrap("renewing the lease", err)
	}
	return r, nil
}

// release ends leadership token and wakes the next leader: successor if
// it waits ("" for the first in line).
func (e *Elector) release(ctx context.Context, token int64, successor string) error {
	_, err := e.releaseTo(ctx, token, successor)
	return err
}

// releaseTo is release, returning the successor the hand-over names ("" if
// none).
func (e *Elector) releaseTo(ctx context.Context, token int64, successor string) (string, error) {
	e.statements.Add(1)
	var (
		released bool
		to       *string
		succ     *string
	)
	if successor != "" {
		succ = &successor
	}
	err := e.pool.QueryRow(ctx, "SELECT released, successor FROM "+e.schema+".release($1, $2, $3, $4::bigint * interval '1 millisecond')",
		e.name, token, succ, e.o.Window().Milliseconds()).Scan(&released, &to)
	if err != nil {
		return "", e.wrap("releasing the leadership", err)
	}
	if to == nil {
		return "", nil
	}
	return *to, nil
}

// withdraw removes the waiting candidate of arrival.
func (e *Elector) withdraw(ctx context.Context, arrival int64) error {
	e.statements.Add(1)
	_, err := e.pool.Exec(ctx, "SELECT "+e.schema+".withdraw($1, $2)", e.name, arrival)
	return e.wrap("withdrawing the candidate", err)
}

// readLeader reads the current leadership and how long its lease has
// left on the server's clock. A leader whose ID is not valid (a row an
// operator wrote by hand) is no leader: it is logged.
func (e *Elector) readLeader(ctx context.Context) (election.Leader, float64, error) {
	e.statements.Add(1)
	var (
		l     election.Leader
		left  float64
		token int64
	)
	err := e.pool.QueryRow(ctx, "SELECT leader, coalesce(value, ''::bytea), coalesce(priority, 0), token, "+
		"extract(epoch FROM expires - clock_timestamp()) * 1000 FROM "+e.schema+".elections "+
		"WHERE name = $1 AND leader IS NOT NULL AND expires > clock_timestamp()", e.name).Scan(&l.ID, &l.Value, &l.Priority, &token, &left)
	if errors.Is(err, pgx.ErrNoRows) {
		return election.Leader{}, 0, nil
	}
	if err != nil {
		return election.Leader{}, 0, e.wrap("reading the leader", err)
	}
	if err := backend.ValidateID(l.ID); err != nil || token <= 0 {
		e.log.Warn("postgres election: the election's row names no valid leader; taken as none", "election", e.name, "leader", l.ID, "token", token, "err", err)
		return election.Leader{}, 0, nil
	}
	l.Token = uint64(token)
	if len(l.Value) == 0 {
		l.Value = nil
	}
	return l, left, nil
}

// wrap adds the statement and the election to err; nil stays nil.
func (e *Elector) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("postgres election %q (schema %s): %s: %w", e.name, e.schema, what, err)
}
