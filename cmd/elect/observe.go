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
priority and its value, or "(no leader)". The first line is the state when observe starts.
With --json each line is a JSON object:

  {"time":"…","leader":true,"id":"sched-1","token":42,"priority":1,"value":"10.0.0.7:8080"}
  {"time":"…","leader":false}

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
				for l := range e.Observe(ctx) {
					if err := writeLeader(w, asJSON, time.Now(), l); err != nil {
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
token, priority and value on one line, or with --json as a JSON object
{"id":"sched-1","token":42,"priority":1,"value":"10.0.0.7:8080"} (a
priority of 0 is left out). The read is
linearizable: it sees every leadership etcd confirmed before it.

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
				return writeLeader(w, asJSON, time.Time{}, l)
			}
		},
	}
}

// leaderJSON is one line of observe --json (with Time) or the output of
// leader --json (without).
type leaderJSON struct {
	Time     string `json:"time,omitempty"`
	Leader   *bool  `json:"leader,omitempty"`
	ID       string `json:"id,omitempty"`
	Token    uint64 `json:"token,omitempty"`
	Priority int64  `json:"priority,omitempty"`
	Value    string `json:"value,omitempty"`
}

// writeLeader writes one line about l; at is its time, or zero for none.
func writeLeader(w io.Writer, asJSON bool, at time.Time, l election.Leader) error {
	var line []byte
	if asJSON {
		j := leaderJSON{ID: l.ID, Token: l.Token, Priority: l.Priority, Value: string(l.Value)}
		if !at.IsZero() {
			lead := !l.IsZero()
			j.Time, j.Leader = at.Format(timeLayout), &lead
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
			line = append(line, "(no leader)\n"...)
		} else {
			line = fmt.Appendf(line, "%s  token=%d  priority=%d  value=%s\n", l.ID, l.Token, l.Priority, strconv.Quote(string(l.Value)))
		}
	}
	_, err := w.Write(line)
	return err
}
