package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/postgres"
)

// pgConn is the PostgreSQL backend's flags. The password, like every
// connection setting --dsn leaves out, comes from the PG* environment
// (PGPASSWORD, PGPASSFILE, PGHOST, …), as for psql.
type pgConn struct {
	dsn         string
	schema      string
	connTimeout time.Duration
}

func pgFlags(f *flagSet, _ bool) opener {
	c := &pgConn{}
	f.String(&c.dsn, "dsn", "DSN", "", "postgres: connection string (URL or key=value); what it leaves out comes from the PG* environment, as for psql")
	f.String(&c.schema, "pg-schema", "NAME", postgres.DefaultSchema, "postgres: the schema of the election's tables and functions (created on first use)")
	f.Duration(&c.connTimeout, "pg-connect-timeout", "D", 10*time.Second, "postgres: how long to wait for the server at start")
	return c.open
}

// open connects a pool and returns a candidate of the election --name.
func (c *pgConn) open(ctx context.Context, f *flagSet, name string, opts []election.Option) (election.Elector, func() error, error) {
	if c.connTimeout <= 0 {
		return nil, nil, f.Bad("pg-connect-timeout", "must be positive")
	}
	cfg := postgres.Config{Schema: c.schema}
	if err := cfg.Validate(); err != nil {
		return nil, nil, f.Bad("pg-schema", "%s", reason(err))
	}
	pc, err := pgxpool.ParseConfig(c.dsn)
	if err != nil {
		return nil, nil, f.Bad("dsn", "%v", err)
	}
	where := fmt.Sprintf("PostgreSQL at %s:%d", pc.ConnConfig.Host, pc.ConnConfig.Port)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", where, err)
	}
	e, err := postgres.NewConfig(pool, name, cfg, opts...)
	if err != nil {
		pool.Close()
		var oe *election.OptionError
		if errors.As(err, &oe) && oe.Field == "name" {
			return nil, nil, f.Bad("name", "%s", oe.Reason)
		}
		return nil, nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, c.connTimeout)
	_, err = e.Leader(rctx)
	cancel()
	if err != nil && !errors.Is(err, election.ErrNoLeader) {
		e.Close()
		pool.Close()
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within --pg-connect-timeout=%v", c.connTimeout)
		}
		return nil, nil, fmt.Errorf("%s: %w", where, err)
	}
	return e, func() error {
		err := e.Close()
		pool.Close()
		return err
	}, nil
}
