package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/electkit/election"
)

// Event kinds of the story. The first five come from the library: Campaign
// calls and Run's callbacks; the others are the story's own actions and
// measurements.
const (
	evCampaign = "campaign" // Campaign was called
	evElected  = "elected"  // OnElected
	evDemoted  = "demoted"  // OnDemoted
	evLeader   = "leader"   // OnLeader
	evError    = "error"    // OnError: a Campaign failed and Run retries
	evResign   = "resign"
	evHandover = "handover"
	evCrash    = "crash"
	evFailover = "failover"
	evRecover  = "recover"
	evTransfer = "transfer"
	evPreempt  = "preempt"
	evShutdown = "shutdown"
)

// demoEvent is one line of the story.
type demoEvent struct {
	at     time.Duration // since the story started
	who    string        // a candidate's ID, or "" for the story itself
	kind   string
	detail string
	token  uint64          // elected, demoted: the term's token
	leader election.Leader // leader: what OnLeader reported
	term   *election.Term  // elected: the term
}

// narrator records the story's events and prints them. Callbacks call it
// from their own goroutines; the story waits on it for what it needs.
//
// OnLeader reports are not printed one by one (every candidate reports
// every change): a line is printed when a report makes every live
// candidate's latest report name the same leader (or none) and they did
// not all agree on it just before.
type narrator struct {
	w     io.Writer
	color bool
	start time.Time
	whoW  int      // width of the candidate column
	order []string // candidate IDs, in order

	mu      sync.Mutex
	events  []demoEvent
	changed chan struct{}              // closed and replaced at every event
	seen    map[string]election.Leader // the latest OnLeader report of each candidate
	down    map[string]bool            // crashed candidates: left out of the agreement
	quiet   bool                       // OnLeader reports are no longer printed
}

func newNarrator(w io.Writer, color bool, ids []string) *narrator {
	n := &narrator{w: w, color: color, start: time.Now(), whoW: len("who"), order: ids,
		changed: make(chan struct{}), seen: map[string]election.Leader{}, down: map[string]bool{}}
	for _, id := range ids {
		n.whoW = max(n.whoW, len(id))
	}
	return n
}

// record adds an event, prints it and wakes the waiters. It returns the
// event with its time.
func (n *narrator) record(ev demoEvent) demoEvent {
	n.mu.Lock()
	defer n.mu.Unlock()
	ev.at = time.Since(n.start)
	n.events = append(n.events, ev)
	close(n.changed)
	n.changed = make(chan struct{})
	if ev.kind != evLeader {
		n.printLocked(ev.at, ev.who, ev.kind, ev.detail)
		return ev
	}
	before, agreed := n.agreedLocked()
	n.seen[ev.who] = ev.leader
	now, agree := n.agreedLocked()
	if n.quiet || !agree || (agreed && before.Equal(now)) {
		return ev
	}
	what := "none"
	if !now.IsZero() {
		what = fmt.Sprintf("%s (token %d)", now.ID, now.Token)
	}
	at := "every candidate"
	if live := n.liveLocked(); len(live) < len(n.order) {
		at = "every live candidate: " + strings.Join(live, " ")
	}
	n.printLocked(ev.at, "*", evLeader, fmt.Sprintf("%s, as OnLeader now reports at %s", what, at))
	return ev
}

// agreedLocked returns the leader that every live candidate's latest
// OnLeader report names, if they have all reported and agree.
func (n *narrator) agreedLocked() (election.Leader, bool) {
	var l election.Leader
	first := true
	for _, id := range n.liveLocked() {
		got, ok := n.seen[id]
		if !ok || (!first && !got.Equal(l)) {
			return election.Leader{}, false
		}
		l, first = got, false
	}
	return l, !first
}

func (n *narrator) liveLocked() []string {
	var ids []string
	for _, id := range n.order {
		if !n.down[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

// setDown marks a candidate crashed (or back up).
func (n *narrator) setDown(id string, down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down[id] = down
}

// ANSI colours, used only when stdout is a terminal.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

func (n *narrator) paint(code, s string) string {
	if !n.color || code == "" {
		return s
	}
	return code + s + ansiReset
}

var eventColors = map[string]string{
	evElected: ansiGreen, evDemoted: ansiYellow, evLeader: ansiDim, evError: ansiRed,
	evCrash: ansiRed, evResign: ansiCyan, evHandover: ansiCyan, evFailover: ansiCyan, evRecover: ansiCyan,
}

func (n *narrator) printLocked(at time.Duration, who, kind, detail string) {
	if who == "" {
		who = "-"
	}
	fmt.Fprintf(n.w, "%7.3fs  %-*s  %s  %s\n", at.Seconds(), n.whoW, who,
		n.paint(eventColors[kind], fmt.Sprintf("%-8s", kind)), detail)
}

// heading prints the title of a step of the story.
func (n *narrator) heading(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.w, "\n%s\n", n.paint(ansiBold, fmt.Sprintf("── "+format, args...)))
}

// columns prints the header of the event columns.
func (n *narrator) columns() {
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.w, "%8s  %-*s  %-8s  %s\n", "elapsed", n.whoW, "who", "event", "detail")
}

// stamp formats a point in time relative to the story's start: "+1.234s".
func (n *narrator) stamp(t time.Time) string {
	return fmt.Sprintf("+%.3fs", t.Sub(n.start).Seconds())
}

// mark returns the number of events so far: waits look at later ones.
func (n *narrator) mark() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.events)
}

// leading returns the candidates whose OnElected has no OnDemoted yet.
func (n *narrator) leading() map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	terms := map[uint64]string{}
	for _, ev := range n.events {
		switch ev.kind {
		case evElected:
			terms[ev.token] = ev.who
		case evDemoted:
			delete(terms, ev.token)
		}
	}
	out := map[string]bool{}
	for _, who := range terms {
		out[who] = true
	}
	return out
}

// silence stops printing OnLeader reports (they are still recorded).
func (n *narrator) silence() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.quiet = true
}

// waitUntil waits until cond, called with the narrator locked after every
// event, holds; or fails after limit, naming what it waited for.
func (n *narrator) waitUntil(ctx context.Context, limit time.Duration, what string, cond func() bool) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		n.mu.Lock()
		ok, ch := cond(), n.changed
		n.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return fmt.Errorf("no %s within %v", what, limit)
		}
	}
}

// waitEvent waits for the first event at or after index from that matches.
func (n *narrator) waitEvent(ctx context.Context, limit time.Duration, from int, what string, match func(demoEvent) bool) (demoEvent, error) {
	var got demoEvent
	err := n.waitUntil(ctx, limit, what, func() bool {
		for _, ev := range n.events[from:] {
			if match(ev) {
				got = ev
				return true
			}
		}
		return false
	})
	return got, err
}

// waitSeen waits until every candidate in ids reports the leadership of
// token through OnLeader.
func (n *narrator) waitSeen(ctx context.Context, limit time.Duration, ids []string, token uint64) error {
	return n.waitUntil(ctx, limit, fmt.Sprintf("OnLeader report of token %d at %s", token, strings.Join(ids, " ")), func() bool {
		for _, id := range ids {
			if n.seen[id].Token != token {
				return false
			}
		}
		return true
	})
}

// fmtLatency rounds d for reading: 1.2ms, 35ms, 1.32s.
func fmtLatency(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

// isTerminal reports whether w is a terminal that takes colours: a
// character device, with NO_COLOR unset.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	if _, set := os.LookupEnv("NO_COLOR"); set {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
