// Package postgres is a backend of package election on PostgreSQL: leader
// election for services that already run PostgreSQL and no coordination
// service, with a fence that the leader's own SQL checks in the same
// transaction as its writes.
//
//	pool, _ := pgxpool.New(ctx, "")   // PG* environment, as psql
//	e, err := postgres.New(pool, "/services/scheduler", election.WithID("node-1"))
//	t, err := e.Campaign(ctx)         // blocks until this candidate leads
//
// # Protocol
//
// Each election is a row of <schema>.elections (the current leadership:
// leader, token, lease expiry) and each waiting candidate a row of
// <schema>.candidates (its priority, its arrival, its heartbeat's expiry).
// Everything is done by a few PL/pgSQL functions of the schema, one
// statement — one transaction — each, on whichever pooled connection is
// free (SchemaSQL holds them):
//
//   - register queues a candidate; campaign is its heartbeat and, in the
//     same statement, its claim: under the election row's lock, the claim
//     succeeds only if the row has no leader whose lease is current on the
//     server's clock (clock_timestamp()), and only for the first in line
//     (the highest priority, then the earliest arrival, among candidates
//     whose heartbeats are current) or the successor a hand-over named.
//     The claim raises the election's token and sets the lease's expiry to
//     the server's clock plus the TTL.
//   - renew extends the lease of one token, if the row still holds it
//     unexpired; release ends it and wakes the next leader; withdraw
//     removes a waiting candidate.
//
// Priority, preemption and transfer are as on the other backends: the
// queue's order is the priority, then the arrival; a leader made
// WithPreemption learns at its renewal that a candidate of higher
// priority has waited its hold-off, ends its Term and hands over to it;
// Transfer releases naming a successor that alone may claim for a lease
// window; RequestTransfer writes a request into the election's row, which
// the leader hears of by notification and honours as Transfer.
//
// No session state carries leadership: no advisory lock, no transaction
// left open. A pooled connection that is recycled, reset, killed
// (pg_terminate_backend) or reconnected decides nothing; the row and the
// server's clock do.
//
// # The contract
//
//   - Expiry is the server's: a lease ends when the server's clock passes
//     the expiry the claim or the latest renewal wrote, inside the writing
//     statement. Two claims of one election are serialized by the row's
//     lock; the second sees the first's lease.
//   - The leader's Term ends by its own clock first (P3): its deadline is
//     the renewal statement's send time + TTL/(1+Drift) − Margin on this
//     process's monotonic clock (backend.LeaseClock). The server's expiry is
//     at least the statement's execution time + TTL, later than the send,
//     so no other candidate can claim while the Term is valid as long as
//     the server's clock runs no more than 1+Drift times faster than this
//     process's.
//   - A step of the server's wall clock is not covered by Drift: a forward
//     step of s shortens every lease by s on the server, so for up to s
//     another candidate may be elected while the old leader's Term is still
//     valid on its own clock. The database still refuses the old leader's
//     fenced writes (Fence checks the token against the row under its
//     lock), which is why the fence, not the deadline, guards the data. A
//     backward step lengthens leases: failover after a crash is slower by
//     s, safety is unchanged. Run the server with a slewing NTP client.
//   - The token is a number the database raises in the winning write:
//     greatest(nextval(<schema>.tokens), the row's token + 1). Both the
//     sequence and the row are WAL-logged, so tokens strictly increase
//     across every restart of candidates and server, fast or immediate
//     (P2); a sequence may skip values after a crash, never go back. The
//     sequence belongs to no column: TRUNCATE ... RESTART IDENTITY leaves it.
//
// # Fencing where the data is
//
// Fence gives a condition for the leader's own statements —
// <schema>.fence(name, token) — that is true only while the token is the
// election's current, unexpired leadership, and otherwise raises SQLSTATE
// EL001 (FencedSQLState, IsFenced) and aborts the transaction. It takes a
// share lock on the election's row until the transaction ends, so the next
// leader's claim waits for the fenced transaction to commit or roll back:
// a fenced write is never made after the next leadership began, whatever
// the clocks do. FenceTx runs it first in a pgx.Tx.
//
// # Waiting without polling or herd
//
// Each candidate has a LISTEN channel of its own, named in its row. A
// release notifies only the next leader's channel (the first in line, or
// the named successor), and a withdrawal only the new first in line if the
// one withdrawing was first: a hand-over wakes one candidate (P9). The
// first in line also wakes when the lease it read lapses (a crashed
// leader); every candidate wakes on its heartbeat (a third of the lease
// window), which doubles as the fallback poll, counted in Stats.Polled.
// Observers and the leader listen to the election's channel, notified by
// a trigger on every change of the election's row but a renewal — which
// is how a leader learns at once that an operator deleted, updated or
// truncated its row.
//
// The Electors of one pool share one listening connection, opened from
// the pool's configuration but outside the pool (so never recycled). When
// it drops, every subscriber is woken (a notification may have been lost)
// and reads the election again; the listener reconnects with a growing
// pause (up to a second) and LISTENs again, then wakes every subscriber
// once more. Meanwhile candidates fall back to their heartbeats (the
// worst case is a hand-over that takes a third of the lease window rather
// than a round trip); safety never depends on a notification.
//
// # Faults and other clients
//
//   - A lost connection or a canceled statement (statement_timeout,
//     lock_timeout, a server restarting, pg_terminate_backend) is retried;
//     a leader's Term survives it if a renewal succeeds before the
//     deadline, and otherwise ends with election.ErrLeaseExpired.
//   - An error that waiting does not cure (a REVOKE, the schema or a
//     function dropped) ends a Term at once with election.ErrSessionLost
//     wrapping the server's error, and Campaign returns it.
//   - An operator's DELETE, UPDATE or TRUNCATE of the election's row ends
//     the leader's Term at once (election.ErrSessionLost) if its token is
//     no longer the row's; a waiting candidate whose row is deleted queues
//     again.
//   - Failover to a promoted standby keeps the contract when the standby
//     was synchronous (no commit, so no claim and no token, is lost):
//     name both hosts with target_session_attrs=read-write and the pool
//     and the listener find the new primary. With asynchronous
//     replication the last claim may be lost and its token handed out
//     again.
//
// # Schema
//
// The tables and functions live in a schema, DefaultSchema ("election")
// unless Config.Schema names another. An Elector creates it on first use
// in one transaction under an advisory transaction lock, unless
// <schema>.schema_version() already returns SchemaVersion; a DBA may create
// it instead from SchemaSQL (or Schema(name)) and grant the electing role
// only USAGE on the schema and sequences, the DML rights on the two tables
// and EXECUTE on the functions.
package postgres
