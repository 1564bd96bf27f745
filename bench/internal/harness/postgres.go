package harness

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/postgres"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/bench/internal/peers/pg"
	"github.com/electkit/election/internal/rig/pgtest"
)

// PGRow is one library's figures in the postgres scenario.
type PGRow struct {
	Lib  string `json:"library"`
	Role string `json:"role"`
	// Handover: release → the next candidate leads, 3 candidates.
	HandoverP50, HandoverP99 float64
	HandoverN                int
	// Crash: the leader cut off (TTL 2 s) → the next leads.
	CrashP50, CrashMax float64
	CrashN             int
	// Idle: N candidates of one election, one leading; the statements the
	// candidates sent per second per candidate over the window, the time
	// until N-1 waited, and the server backends they held.
	IdleN          int
	Register       float64 // ms
	ClientPerCand  float64
	Connections    int
	Note           string
	Err            string
	handover, fail []float64
}

const pgTTL = 2 * time.Second

// postgres runs backend/postgres beside the advisory-lock election on one
// PostgreSQL 15 cluster of its own (Debian's; internal/rig/pgtest).
func (r *run) postgres(ctx context.Context) error {
	if err := pgtest.Available(); err != nil {
		r.rep.note("NOT MEASURED: postgres scenario: " + err.Error())
		return nil
	}
	r.rep.note("NOT MEASURED: cirello.io/pglock: the module proxy does not serve it here")
	srv, err := pgtest.New()
	if err != nil {
		return err
	}
	defer srv.Remove()
	if err := srv.Start(); err != nil {
		return err
	}
	dsn := func(addr string) string { return srv.DSN("", addr) }
	samples, crashes, idleN, naiveN, window := 30, 5, 1000, 200, 10*time.Second
	if r.cfg.Short {
		samples, crashes, idleN, naiveN, window = 3, 1, 20, 10, time.Second
	}
	if r.cfg.Samples > 0 {
		samples, crashes = r.cfg.Samples, min(crashes, r.cfg.Samples)
	}
	libs := []struct {
		lib  peer.Library
		role string
		n    int
	}{
		{&pg.Ours{Addr: srv.Addr, DSN: dsn}, "ours", idleN},
		{&pg.Advisory{Addr: srv.Addr, DSN: dsn, Poll: 100 * time.Millisecond}, "naive", naiveN},
	}
	for i, l := range libs {
		if r.cfg.Libs != "" && !matches(r.cfg.Libs, l.lib.Name()) {
			continue
		}
		row := &PGRow{Lib: l.lib.Name(), Role: l.role}
		r.rep.Postgres = append(r.rep.Postgres, row)
		name := fmt.Sprintf("/bench/pg%d", i)
		r.logf("postgres: %s: handover", row.Lib)
		if err := pgHandover(ctx, l.lib, name+"/handover", samples, row); err != nil {
			row.Err = err.Error()
			continue
		}
		r.logf("postgres: %s: crash", row.Lib)
		if err := pgCrash(ctx, l.lib, name+"/crash", crashes, row); err != nil {
			row.Err = err.Error()
			continue
		}
		r.logf("postgres: %s: %d idle candidates", row.Lib, l.n)
		var err error
		if l.role == "ours" {
			err = pgIdleOurs(ctx, srv, name+"/idle", l.n, window, row)
		} else {
			err = pgIdlePeer(ctx, srv, l.lib, name+"/idle", l.n, window, row)
			row.Note = fmt.Sprintf("a connection per candidate (the lock is the session's): measured at N = %d, not %d; polls every 100 ms", l.n, idleN)
		}
		if err != nil {
			row.Err = err.Error()
		}
	}
	return nil
}

func matches(filter, name string) bool {
	for _, f := range strings.Split(filter, ",") {
		if f = strings.TrimSpace(f); f != "" && strings.Contains(name, f) {
			return true
		}
	}
	return false
}

type pgWon struct {
	c   peer.Candidate
	at  int64
	err error
}

func pgCampaign(ctx context.Context, c peer.Candidate, ch chan<- pgWon) {
	go func() {
		at, err := c.Campaign(ctx)
		ch <- pgWon{c, at, err}
	}()
}

// pgHandover: three candidates pass the leadership around samples times.
func pgHandover(ctx context.Context, lib peer.Library, name string, samples int, row *PGRow) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	ch := make(chan pgWon, 4)
	var cs []peer.Candidate
	pending := 0 // Campaign calls not yet received from ch
	defer func() {
		// The Campaign calls still out end with ctx before their
		// candidates close: a candidate is not closed under a call.
		cancel()
		for ; pending > 0; pending-- {
			<-ch
		}
		for _, c := range cs {
			c.Close()
		}
	}()
	for i := range 3 {
		c, err := lib.NewCandidate(ctx, name, fmt.Sprintf("h%d", i), pgTTL)
		if err != nil {
			return err
		}
		cs = append(cs, c)
		pgCampaign(ctx, c, ch)
		pending++
	}
	w := <-ch
	pending--
	if w.err != nil {
		return w.err
	}
	for range samples {
		// The waiters have settled: the old leader queued again a while ago.
		time.Sleep(50 * time.Millisecond)
		at, err := w.c.Release(ctx)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		old := w.c
		w = <-ch
		pending--
		if w.err != nil {
			return w.err
		}
		row.handover = append(row.handover, float64(w.at-at)/1e6)
		pgCampaign(ctx, old, ch)
		pending++
	}
	d := &Dist{MS: row.handover}
	row.HandoverP50, row.HandoverP99, row.HandoverN = d.Q(0.5), d.Q(0.99), len(row.handover)
	return nil
}

// pgCrash: a leader cut off, its waiter takes over; fresh candidates for
// each sample.
func pgCrash(ctx context.Context, lib peer.Library, name string, samples int, row *PGRow) error {
	for i := range samples {
		err := func() error {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			a, err := lib.NewCandidate(ctx, name, fmt.Sprintf("a%d", i), pgTTL)
			if err != nil {
				return err
			}
			defer a.Close()
			b, err := lib.NewCandidate(ctx, name, fmt.Sprintf("b%d", i), pgTTL)
			if err != nil {
				return err
			}
			defer b.Close()
			if _, err := a.Campaign(ctx); err != nil {
				return err
			}
			ch := make(chan pgWon, 1)
			pgCampaign(ctx, b, ch)
			time.Sleep(200 * time.Millisecond) // b waits
			at, _ := a.Crash()
			w := <-ch
			if w.err != nil {
				return fmt.Errorf("failover: %w", w.err)
			}
			row.fail = append(row.fail, float64(w.at-at)/1e6)
			return nil
		}()
		if err != nil {
			return err
		}
	}
	d := &Dist{MS: row.fail}
	row.CrashP50, row.CrashMax, row.CrashN = d.Q(0.5), d.Q(1), len(row.fail)
	return nil
}

func backends(srv *pgtest.Server) int {
	out, err := srv.PSQL("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
	if err != nil {
		return 0
	}
	var n int
	fmt.Sscan(out, &n)
	return n - 1 // psql's own
}

// steady measures the candidates' statements over window. (The server's
// own count, pg_stat_database.xact_commit, is no measure over seconds:
// busy backends defer flushing it for up to a minute.)
func steady(srv *pgtest.Server, window time.Duration, n int, stmts func() int64, row *PGRow) error {
	time.Sleep(window / 4) // past the registrations' burst
	s0, t0 := stmts(), time.Now()
	time.Sleep(window)
	s1, el := stmts(), time.Since(t0).Seconds()
	row.IdleN = n
	row.ClientPerCand = float64(s1-s0) / el / float64(n)
	row.Connections = backends(srv)
	return nil
}

// pgIdleOurs: n Electors of one election on one pool (one process).
func pgIdleOurs(ctx context.Context, srv *pgtest.Server, name string, n int, window time.Duration, row *PGRow) error {
	cfg, err := pgxpool.ParseConfig(srv.DSN("", ""))
	if err != nil {
		return err
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		es []*postgres.Elector
		wg sync.WaitGroup
	)
	defer func() {
		cancel()
		wg.Wait()
		for _, e := range es {
			e.Close()
		}
	}()
	start := time.Now()
	for i := range n {
		e, err := postgres.New(pool, name, election.WithID(fmt.Sprintf("i%d", i)), election.WithTTL(10*time.Second))
		if err != nil {
			return err
		}
		es = append(es, e)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = e.Campaign(ctx)
		}()
	}
	for {
		cs, err := es[0].Candidates(ctx)
		if err == nil && len(cs) >= n-1 {
			break
		}
		if time.Since(start) > 2*time.Minute {
			return fmt.Errorf("%d of %d candidates waiting after 2 min", len(cs), n-1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	row.Register = float64(time.Since(start).Microseconds()) / 1000
	return steady(srv, window, n, func() (s int64) {
		for _, e := range es {
			s += e.Stats().Statements
		}
		return s
	}, row)
}

// pgIdlePeer: n candidates of lib, each on its own connection.
func pgIdlePeer(ctx context.Context, srv *pgtest.Server, lib peer.Library, name string, n int, window time.Duration, row *PGRow) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cs []peer.Candidate
	ch := make(chan pgWon, n)
	defer func() {
		cancel()
		for _, c := range cs {
			c.Close()
		}
	}()
	start := time.Now()
	for i := range n {
		c, err := lib.NewCandidate(ctx, name, fmt.Sprintf("i%d", i), 10*time.Second)
		if err != nil {
			return err
		}
		cs = append(cs, c)
		pgCampaign(ctx, c, ch)
	}
	row.Register = float64(time.Since(start).Microseconds()) / 1000
	return steady(srv, window, n, func() (s int64) {
		for _, c := range cs {
			if st, ok := c.(pg.Statements); ok {
				s += st.Statements()
			}
		}
		return s
	}, row)
}

// pgMarkdown renders the postgres scenario's table.
func (r *Report) pgMarkdown(w func(string, ...any)) {
	if len(r.Postgres) == 0 {
		return
	}
	w("## PostgreSQL 15: backend/postgres beside a pg_try_advisory_lock election\n\n")
	w("One cluster (Debian's postgresql-15, fsync off), loopback; each candidate of the handover and crash cases on its own pool or connection through its own proxy. Handover: release → the next of three candidates leads. Crash: the leader's connection cut (TTL 2 s) → the waiter leads. Idle: N candidates of one election (TTL 10 s), one leading: the statements they sent (each one transaction), per second per candidate — the leader's renewals and the waiters' heartbeats on backend/postgres, the polls on the advisory lock; pgxpool's own liveness pings of connections idle for over a second are not counted — and the server backends they held.\n\n")
	w("| library | role | handover p50 / p99 ms (n) | crash failover p50 / max ms (n) | idle N | until N−1 wait ms | statements/s per candidate | backends held | note |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Postgres {
		note := p.Note
		if p.Err != "" {
			note = "error: " + p.Err
		}
		w("| %s | %s | %s / %s (%d) | %s / %s (%d) | %d | %s | %.3f | %d | %s |\n", p.Lib, p.Role,
			ms(p.HandoverP50), ms(p.HandoverP99), p.HandoverN, ms(p.CrashP50), ms(p.CrashMax), p.CrashN,
			p.IdleN, ms(p.Register), p.ClientPerCand, p.Connections, note)
	}
	w("\n")
}
