// Package pgsuite runs the conformance suite (package electiontest) on
// backend/postgres against a real PostgreSQL 15 server (Debian's, started
// by internal/rig/pgtest), and the backend's own real-server tests: the
// fence refusing a stale leader's write inside the database, and the
// server's other clients and faults (restarts, killed backends, an
// operator's DELETE, UPDATE and TRUNCATE, REVOKE, statement_timeout). It
// is a module of its own, so that the suite's goroutine-leak checker stays
// out of the module graph of programs that use the backend.
package pgsuite
