package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/electkit/election"
)

// exitNoLeader is elect leader's exit code when the election has no leader.
const exitNoLeader = 3

// timeLayout is how observe writes the time of a change: RFC 3339 with
// milliseconds, in local time.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func observeCommand() *command {
	return &command{
		name:     "observe",
		summary:  "print every change of leader of an election, one line each (or JSON lines)",
		synopsis: "--name NAME [--json] [--endpoints LIST] [flags]",
		about: `Watches the election without taking part in it and prints one line per
change of leader: the local time, the leader's ID, its fencing token, its
priority and its value, or "(no leader)", then the changes seen so far
(changes=N, as the metric election_leader_changes_total counts them) and
how long the state before lasted (after=D). The first line is the state
when observe starts. With --json each line is a JSON object:

  {"time":"…","leader":true,"id":"sched-1","token":42,"priority":1,"value":"10.0.0.7:8080","changes":3,"after_seconds":12.5}
  {"time":"…","leader":false,"changes":4,"after_seconds":0.8}

A slow reader may miss a short-lived leader, never the newest. observe runs
until interrupted (SIGINT or SIGTERM: exit 0). Exit codes: 0 stopped by a
signal, 1 the store failed, 2 bad command line.`,
		example: `elect observe --name /services/scheduler --endpoints 10.0.0.1:2379,10.0.0.2:2379
ELECTION_NAME=/services/scheduler elect observe --json | jq -r 'select(.leader) | .value'`,
		setup: func(f *flagSet) func(context.Context, io.Writer) error {
			ef := defineElectionFlags(f, false, true)
			var asJSON bool
			f.Bool(&asJSON, "json", false, "one JSON object a line")
			return func(ctx context.Context, w io.Writer) error {
				if _, err := ef.check(f, false); err != nil {
					return err
				}
				ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
				e, closeAll, err := ef.open(ctx, f, []election.Option{election.WithLogger(warnLogger(f.stderr))})
				if err != nil {
					return err
				}
				defer closeAll()
				var last time.Time
				changes := -1
				for l := range e.Observe(ctx) {
					now := time.Now()
					changes++
					v := view{at: now, changes: changes, waiting: -1}
					if !last.IsZero() {
						v.after = now.Sub(last)
					}
					last = now
					if err := writeLeader(w, asJSON, v, l); err != nil {
						return err
					}
				}
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("the election's stream ended")
			}
		},
	}
}

func leaderCommand() *command {
	return &command{
		name:     "leader",
		summary:  "print the current leader of an election once (exit 3 when there is none)",
		synopsis: "--name NAME [--json] [--endpoints LIST] [flags]",
		about: `Prints the election's current leader once, for scripts: its ID, fencing
token, priority and value on one line, then how many candidates wait
behind it (waiting=N), or with --json as a JSON object
{"id":"sched-1","token":42,"priority":1,"value":"10.0.0.7:8080","waiting":2}
(a priority of 0 is left out). The read is linearizable: it sees every
leadership the store confirmed before it.

Exit codes: 0 a leader was printed, 3 the election has no leader now
(nothing is printed), 1 the store failed, 2 bad command line.`,
		example: `elect leader --name /services/scheduler
addr=$(elect leader --name /services/scheduler --json | jq -r .value)`,
		setup: func(f *flagSet) func(context.Context, io.Writer) error {
			ef := defineElectionFlags(f, false, true)
			var asJSON bool
			f.Bool(&asJSON, "json", false, "print a JSON object")
			return func(ctx context.Context, w io.Writer) error {
				if _, err := ef.check(f, false); err != nil {
					return err
				}
				ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
				e, closeAll, err := ef.open(ctx, f, []election.Option{election.WithLogger(warnLogger(f.stderr))})
				if err != nil {
					return err
				}
				defer closeAll()
				l, err := e.Leader(ctx)
				switch {
				case errors.Is(err, election.ErrNoLeader):
					return &exitError{code: exitNoLeader}
				case err != nil:
					return err
				}
				v := view{waiting: -1}
				if cs, err := election.Candidates(ctx, e); err == nil {
					v.waiting = len(cs)
				}
				return writeLeader(w, asJSON, v, l)
			}
		},
	}
}

// leaderJSON is one line of observe --json (with Time) or the output of
// leader --json (without).
type leaderJSON struct {
	Time     string   `json:"time,omitempty"`
	Leader   *bool    `json:"leader,omitempty"`
	ID       string   `json:"id,omitempty"`
	Token    uint64   `json:"token,omitempty"`
	Priority int64    `json:"priority,omitempty"`
	Value    string   `json:"value,omitempty"`
	Changes  *int     `json:"changes,omitempty"`
	After    *float64 `json:"after_seconds,omitempty"`
	Waiting  *int     `json:"waiting,omitempty"`
}

// view is what a line says besides the leader: observe's time, changes
// and the previous state's length; leader's count of waiting candidates
// (-1: unknown).
type view struct {
	at      time.Time
	changes int
	after   time.Duration
	waiting int
}

// writeLeader writes one line about l.
func writeLeader(w io.Writer, asJSON bool, v view, l election.Leader) error {
	at := v.at
	var line []byte
	if asJSON {
		j := leaderJSON{ID: l.ID, Token: l.Token, Priority: l.Priority, Value: string(l.Value)}
		if !at.IsZero() {
			lead := !l.IsZero()
			j.Time, j.Leader, j.Changes = at.Format(timeLayout), &lead, &v.changes
			if v.after > 0 {
				secs := v.after.Seconds()
				j.After = &secs
			}
		}
		if v.waiting >= 0 {
			j.Waiting = &v.waiting
		}
		b, err := json.Marshal(j)
		if err != nil {
			return err
		}
		line = append(b, '\n')
	} else {
		if !at.IsZero() {
			line = fmt.Appendf(line, "%s  ", at.Format(timeLayout))
		}
		if l.IsZero() {
			line = append(line, "(no leader)"...)
		} else {
			line = fmt.Appendf(line, "%s  token=%d  priority=%d  value=%s", l.ID, l.Token, l.Priority, strconv.Quote(string(l.Value)))
		}
		if !at.IsZero() {
			line = fmt.Appendf(line, "  changes=%d", v.changes)
			if v.after > 0 {
				line = fmt.Appendf(line, "  after=%v", v.after.Round(time.Millisecond))
			}
		}
		if v.waiting >= 0 {
			line = fmt.Appendf(line, "  waiting=%d", v.waiting)
		}
		line = append(line, '\n')
	}
	_, err := w.Write(line)
	return err
}
