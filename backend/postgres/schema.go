package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

// DefaultSchema is the PostgreSQL schema an Elector keeps its tables and
// functions in unless Config.Schema names another.
const DefaultSchema = "election"

// SchemaVersion is the version of the schema this package uses; the
// schema's function schema_version() returns it.
const SchemaVersion = 1

// SchemaSQL is the schema in DefaultSchema: the statements an Elector runs
// on first use (unless the schema is there already), for a DBA who creates
// it in advance. Schema gives them for another schema name.
//
//go:embed schema.sql
var SchemaSQL string

// Schema returns SchemaSQL for the schema called name, or an
// *election.OptionError if name is not a valid schema name (see
// Config.Schema).
func Schema(name string) (string, error) {
	if err := validateSchema(name); err != nil {
		return "", err
	}
	return schemaFor(name), nil
}

func schemaFor(name string) string {
	r := strings.NewReplacer(
		"election.", name+".",
		"EXISTS election;", "EXISTS "+name+";",
		"'election/'", "'"+name+"/'",
		"md5('election')", "md5('"+name+"')",
		`schema "election"`, `schema "`+name+`"`,
	)
	return r.Replace(SchemaSQL)
}

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// validateSchema accepts lower-case unquoted SQL identifiers only: the
// name is written into statements verbatim and into the name of a setting.
func validateSchema(name string) error {
	if !schemaName.MatchString(name) || strings.HasPrefix(name, "pg_") {
		return &election.OptionError{Field: "Schema", Value: backend.QuoteValue(name),
			Reason: "must be 1 to 63 of a-z, 0-9 and _, not beginning with a digit or pg_ (an unquoted PostgreSQL identifier)"}
	}
	return nil
}

// ensureSchema creates the schema unless its schema_version() already
// returns SchemaVersion; the DDL runs in one transaction under an
// advisory transaction lock, so concurrent first uses do not collide.
func ensureSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	var v int
	err := pool.QueryRow(ctx, "SELECT "+schema+".schema_version()").Scan(&v)
	if err == nil && v == SchemaVersion {
		return nil
	}
	if err == nil {
		return fmt.Errorf("postgres election: schema %q has version %d, this package uses %d", schema, v, SchemaVersion)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || (pe.Code != "3F000" && pe.Code != "42883" && pe.Code != "42P01") {
		return fmt.Errorf("postgres election: reading the version of schema %q: %w", schema, err)
	}
	h := fnv.New64a()
	h.Write([]byte("github.com/electkit/election/backend/postgres:" + schema))
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schemaFor(schema))
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres election: creating schema %q (a DBA can run postgres.SchemaSQL instead): %w", schema, err)
	}
	return nil
}
