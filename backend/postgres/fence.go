package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/electkit/election"
)

// FencedSQLState is the SQLSTATE of the error the schema's fence function
// raises when the token it is given is not the election's current,
// unexpired leadership.
const FencedSQLState = "EL001"

// Fence returns a condition for a statement of the leader's own, and its
// arguments, that holds only while t is the election's current leadership:
// "<schema>.fence($n, $n+1)", which is true when t's token is current and
// its lease unexpired on the server's clock, and otherwise raises an error
// of SQLSTATE FencedSQLState, aborting the transaction. It also takes a
// share lock on the election's row until the transaction ends, so no
// other candidate can claim the election before the transaction has
// committed or rolled back: a write fenced by it is never made after the
// next leadership began. n is the number of the first placeholder the
// condition uses. Put it in the statement's WHERE clause (or SELECT it
// first in the same transaction, see FenceTx):
//
//	cond, args := e.Fence(t, 3)
//	tx.Exec(ctx, "UPDATE jobs SET owner = $1 WHERE id = $2 AND "+cond, append([]any{me, id}, args...)...)
//
// A WHERE clause that matches no row does not evaluate it. The share lock
// holds the leader's own renewals too: keep fenced transactions shorter
// than a lease window. The role running them needs the rights the
// Elector's role has on the schema.
func (e *Elector) Fence(t *election.Term, n int) (cond string, args []any) {
	return fmt.Sprintf("%s.fence($%d, $%d)", e.schema, n, n+1), []any{e.name, tokenOf(t)}
}

func tokenOf(t *election.Term) int64 {
	if t == nil {
		return 0 // never a leadership's token: the fence refuses
	}
	return int64(t.Token())
}

// FenceTx runs the fence in tx: it returns nil if t is the election's
// current leadership, holding the election's row until tx ends, and an
// error wrapping election.ErrNotLeader otherwise (tx is then aborted:
// roll it back). Every statement of tx after it is fenced.
func (e *Elector) FenceTx(ctx context.Context, tx pgx.Tx, t *election.Term) error {
	cond, args := e.Fence(t, 1)
	var ok bool
	err := tx.QueryRow(ctx, "SELECT "+cond, args...).Scan(&ok)
	if IsFenced(err) {
		return fmt.Errorf("%w: %w", election.ErrNotLeader, err)
	}
	if err != nil {
		return e.wrap("fencing", err)
	}
	return nil
}

// IsFenced reports whether err is (or wraps) the error the fence raises
// for a leadership that is not current.
func IsFenced(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == FencedSQLState
}
