package postgres_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/postgres"
)

// A leader marks invoices sent with one statement that the database runs
// only while its leadership is current: a leader that paused past its
// lease, while another took over, gets an error instead of a stale write.
func ExampleElector_Fence() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "") // the PG* environment, as psql
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	e, err := postgres.New(pool, "/services/billing", election.WithID("node-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	t, err := e.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	cond, args := e.Fence(t, 2) // placeholders $2 and $3
	_, err = pool.Exec(ctx, "UPDATE invoices SET state = 'sent' WHERE id = $1 AND "+cond, append([]any{42}, args...)...)
	switch {
	case postgres.IsFenced(err):
		log.Print("no longer the leader: the database refused the write")
	case err != nil:
		log.Fatal(err)
	}
}

// A leader's transaction whose every statement is fenced: FenceTx first,
// then the writes; the election's row stays locked for share until the
// commit, so no other candidate can take over in between.
func ExampleElector_FenceTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	e, err := postgres.New(pool, "/services/billing", election.WithID("node-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	t, err := e.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := e.FenceTx(ctx, tx, t); err != nil {
			return err // wraps election.ErrNotLeader
		}
		_, err := tx.Exec(ctx, "INSERT INTO ledger (entry, token) VALUES ($1, $2)", "closing", int64(t.Token()))
		return err
	})
	if err != nil {
		log.Print(err)
	}
}
