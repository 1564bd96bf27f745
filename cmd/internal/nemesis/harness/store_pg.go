package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/postgres"
	"github.com/electkit/election/internal/rig/pgtest"
)

const pgElection = "/nemesis-election"

// pgStore is one PostgreSQL 15 server (Debian's): the store's one member,
// restarted by store-kill (an immediate shutdown, recovered from the WAL).
type pgStore struct {
	srv   *pgtest.Server
	admin *pgxpool.Pool // the operator's and the observers' client
}

func startPG() (*pgStore, error) {
	srv, err := pgtest.New()
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		srv.Remove()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := pgxpool.New(ctx, srv.DSN("", ""))
	if err != nil {
		srv.Remove()
		return nil, err
	}
	// The schema, before any candidate: the operator's statements need it.
	e, err := postgres.New(admin, pgElection, election.WithID("nemesis-operator"))
	if err == nil {
		_, err = e.Candidates(ctx)
		e.Close()
	}
	if err != nil {
		admin.Close()
		srv.Remove()
		return nil, err
	}
	return &pgStore{srv: srv, admin: admin}, nil
}

func (s *pgStore) addrs() []string { return []string{s.srv.Addr} }

// endpoint is the connection string of a candidate through the proxy at
// a (no commas: candidates get their endpoints comma-separated).
func (s *pgStore) endpoint(a string) string {
	host, port, _ := net.SplitHostPort(a)
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable connect_timeout=5", host, port)
}

func (s *pgStore) election() string              { return pgElection }
func (s *pgStore) memberName(int) string         { return "postgres" }
func (s *pgStore) credentials() (string, string) { return "", "" }
func (s *pgStore) peers() *peerNet               { return nil } // one server: no store partitions (Kinds)

func (s *pgStore) leader() int {
	if s.srv.Running() {
		return 0
	}
	return -1
}

func (s *pgStore) isLeader(i int) bool { return i == 0 && s.srv.Running() }

func (s *pgStore) stopMember(int) error { return s.srv.Stop("immediate") }
func (s *pgStore) startMember(int) error {
	return s.srv.Start()
}

func (s *pgStore) close() {
	s.admin.Close()
	s.srv.Remove()
}

// expire deletes a waiting candidate's row, as an operator's DELETE does:
// the candidate hears of it and queues again.
func (s *pgStore) expire(ctx context.Context, rng *rand.Rand, leaderID string) (string, bool, error) {
	rows, err := s.admin.Query(ctx, "SELECT arrival, id FROM election.candidates WHERE name = $1 AND id <> $2 ORDER BY arrival", pgElection, leaderID)
	if err != nil {
		return "", true, err
	}
	type cand struct {
		arrival int64
		id      string
	}
	var cs []cand
	for rows.Next() {
		var c cand
		if err := rows.Scan(&c.arrival, &c.id); err != nil {
			rows.Close()
			return "", true, err
		}
		cs = append(cs, c)
	}
	rows.Close()
	if len(cs) == 0 {
		return "", true, errors.New("no waiting candidate's row")
	}
	c := cs[rng.Intn(len(cs))]
	_, err = s.admin.Exec(ctx, "DELETE FROM election.candidates WHERE arrival = $1", c.arrival)
	return c.id, true, err
}

// garbage writes rows that are no candidate's: a candidate row whose ID
// is not valid (lowest priority, so behind every real candidate), one
// whose heartbeat has lapsed, and another election's row naming a leader
// whose ID is not valid.
func (s *pgStore) garbage(ctx context.Context, rng *rand.Rand) (func(context.Context) error, error) {
	n := rng.Int63()
	other := fmt.Sprintf("%s-garbage-%d", pgElection, n)
	_, err := s.admin.Exec(ctx, `
		INSERT INTO election.candidates (arrival, name, id, value, priority, since, expires, channel) VALUES
			(nextval('election.arrivals'), $1, 'bad id!', '\xff', -9223372036854775808, now(), now() + interval '1 hour', 'el_garbage'),
			(nextval('election.arrivals'), $1, 'stray', '', 1000000, now(), now() - interval '1 second', 'el_garbage')`, pgElection)
	if err == nil {
		_, err = s.admin.Exec(ctx, `INSERT INTO election.elections (name, token, leader, expires) VALUES ($1, 1, 'not an id!', now() + interval '1 hour')`, other)
	}
	remove := func(ctx context.Context) error {
		_, err1 := s.admin.Exec(ctx, "DELETE FROM election.candidates WHERE channel = 'el_garbage'")
		_, err2 := s.admin.Exec(ctx, "DELETE FROM election.elections WHERE name = $1", other)
		return errors.Join(err1, err2)
	}
	return remove, err
}

// operator does what an operator's psql can do to the election's row:
// delete it, truncate the table, mark the lease lapsed, or raise the
// token so that it is nobody's.
func (s *pgStore) operator(ctx context.Context, rng *rand.Rand, leaderID string, op *act) (string, func(context.Context) error, error) {
	actions := []struct{ what, sql string }{
		{"DELETE of the election's row", "DELETE FROM election.elections WHERE name = $1"},
		{"TRUNCATE of the elections", "TRUNCATE election.elections"},
		{"UPDATE of the lease's expiry to the past", "UPDATE election.elections SET expires = now() - interval '1 second' WHERE name = $1"},
		{"UPDATE of the token", "UPDATE election.elections SET token = token + 1000 WHERE name = $1"},
	}
	a := actions[rng.Intn(len(actions))]
	err := op.do(func() error {
		var err error
		if strings.Contains(a.sql, "$1") {
			_, err = s.admin.Exec(ctx, a.sql, pgElection)
		} else {
			_, err = s.admin.Exec(ctx, a.sql)
		}
		return err
	})
	return a.what + " (leader " + leaderID + ")", nil, err
}

func (s *pgStore) transfer(ctx context.Context, to string) (election.Leader, error) {
	e, err := postgres.New(s.admin, pgElection, election.WithID("nemesis-operator"))
	if err != nil {
		return election.Leader{}, err
	}
	defer e.Close()
	return election.RequestTransfer(ctx, e, to)
}

// leaders reads each election's leader with an Elector per election that
// never campaigns.
func (s *pgStore) leaders(ctx context.Context, names []string) (map[string]sideLeader, error) {
	out := map[string]sideLeader{}
	for _, name := range names {
		e, err := postgres.New(s.admin, name, election.WithID("nemesis-observer"))
		if err != nil {
			return out, err
		}
		l, err := e.Leader(ctx)
		e.Close()
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		out[name] = sideLeader{id: l.ID, err: err}
	}
	return out, nil
}
