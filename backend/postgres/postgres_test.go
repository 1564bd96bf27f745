package postgres_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/postgres"
)

// A pool that never connects: the refusals come before any statement.
func idlePool(t *testing.T) *pgxpool.Pool {
	pool, err := pgxpool.New(context.Background(), "host=127.0.0.1 port=1 user=nobody dbname=none sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestNewRefuses(t *testing.T) {
	pool := idlePool(t)
	for _, tc := range []struct {
		what  string
		field string
		new   func() (*postgres.Elector, error)
	}{
		{"nil pool", "pool", func() (*postgres.Elector, error) { return postgres.New(nil, "/a") }},
		{"relative name", "name", func() (*postgres.Elector, error) { return postgres.New(pool, "a") }},
		{"bad ID", "ID", func() (*postgres.Elector, error) { return postgres.New(pool, "/a", election.WithID("a b")) }},
		{"upper-case schema", "Schema", func() (*postgres.Elector, error) {
			return postgres.NewConfig(pool, "/a", postgres.Config{Schema: "Election"})
		}},
		{"pg_ schema", "Schema", func() (*postgres.Elector, error) {
			return postgres.NewConfig(pool, "/a", postgres.Config{Schema: "pg_x"})
		}},
		{"quoted schema", "Schema", func() (*postgres.Elector, error) {
			return postgres.NewConfig(pool, "/a", postgres.Config{Schema: `x"; DROP TABLE y; --`})
		}},
	} {
		e, err := tc.new()
		var oe *election.OptionError
		if e != nil || !errors.As(err, &oe) || oe.Field != tc.field || !errors.Is(err, election.ErrInvalidOption) {
			t.Errorf("%s: %v, %v; want an OptionError of field %s", tc.what, e, err, tc.field)
		}
	}
}

// Schema(name) is SchemaSQL with every object in the named schema, and
// the channels and the setting named after it.
func TestSchemaFor(t *testing.T) {
	sql, err := postgres.Schema("jobs_election")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(^|[^a-z_])election\.|EXISTS election;|'election/'|md5\('election'\)`).FindString(sql); m != "" {
		t.Errorf("Schema(jobs_election) still has %q", m)
	}
	for _, want := range []string{"CREATE SCHEMA IF NOT EXISTS jobs_election;", "jobs_election.fence(", "md5('jobs_election/'", "'jobs_election.quiet'"} {
		if !strings.Contains(sql, want) {
			t.Errorf("Schema(jobs_election) lacks %q", want)
		}
	}
	if def, _ := postgres.Schema(postgres.DefaultSchema); def != postgres.SchemaSQL {
		t.Error("Schema(DefaultSchema) differs from SchemaSQL")
	}
	if _, err := postgres.Schema("1x"); !errors.Is(err, election.ErrInvalidOption) {
		t.Errorf("Schema(1x) = %v, want ErrInvalidOption", err)
	}
}
