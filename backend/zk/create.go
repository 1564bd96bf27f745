package zk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/clock"
)

// start creates the candidate's node: a protected ephemeral-sequential
// create, found again by its GUID when the reply is lost, and its owner
// checked against the connection's session. It creates the election path
// when it is missing.
func (e *Elector) start(ctx context.Context) (*candidacy, error) {
	guid, err := newGUID()
	if err != nil {
		return nil, fmt.Errorf("zk election %s: %w", e.path, err)
	}
	data := encodeRecord(e.o, e.o.Value)
	for attempt := 0; ; attempt++ {
		if err := e.interrupted(ctx, nil); err != nil {
			return nil, err
		}
		if attempt > 0 {
			if err := e.pause(ctx, nil, retryDelay); err != nil {
				return nil, err
			}
		}
		// A candidate of positive priority bumps the queue node in the
		// same multi as its create: a waiter next in line that claims
		// without listing again checks it (see wait). Others cannot sort
		// ahead of a waiter that does.
		var node string
		var cerr error
		queue := int32(-1)
		if err := e.do(ctx, e.closing, func() {
			if e.o.Priority <= 0 {
				node, cerr = e.conn.Create(e.path+"/"+nodePrefix(guid, e.o.Priority), data, gozk.FlagEphemeral|gozk.FlagSequence, e.cfg.NodeACL)
				return
			}
			var res []gozk.MultiResponse
			res, cerr = e.conn.Multi(
				&gozk.CreateRequest{Path: e.path + "/" + nodePrefix(guid, e.o.Priority), Data: data, Flags: gozk.FlagEphemeral | gozk.FlagSequence, Acl: e.cfg.NodeACL},
				&gozk.SetDataRequest{Path: e.path + "/" + queueName, Version: -1})
			switch {
			case cerr == nil && len(res) == 2:
				node, queue = res[0].String, res[1].Stat.Version
			case len(res) == 2 && res[0].Error == nil && errors.Is(res[1].Error, gozk.ErrNoNode):
				cerr = errNoQueue
			}
		}); err != nil {
			return nil, e.findAndDrop(guid, err)
		}
		switch {
		case cerr == nil:
		case errors.Is(cerr, errNoQueue), errors.Is(cerr, gozk.ErrNoNode):
			if err := e.ensurePath(ctx); err != nil {
				return nil, err
			}
			continue
		case e.finalErr("creating a candidate node", cerr) != nil:
			return nil, e.finalErr("creating a candidate node", cerr)
		case errors.Is(cerr, gozk.ErrConnectionClosed), errors.Is(cerr, gozk.ErrNoServer):
			// The reply may be lost while the node exists: look for it by
			// GUID until the answer is certain; never create blindly.
			found, err := e.findGUIDRetry(ctx, guid)
			if err != nil {
				return nil, e.findAndDrop(guid, err)
			}
			if found == "" {
				continue // not created (or gone with an expired session): create again
			}
			node = found
		case errors.Is(cerr, gozk.ErrSessionExpired):
			continue // the client makes a new session; the node cannot exist
		case errors.Is(cerr, gozk.ErrClosing):
			return nil, fmt.Errorf("%w: creating a node under %s: the ZooKeeper connection was closed", election.ErrSessionLost, e.path)
		default:
			return nil, fmt.Errorf("zk election %s: creating a candidate node: %w", e.path, cerr)
		}
		c, err := e.adopt(ctx, node, guid, queue)
		if err != nil {
			return nil, err
		}
		if c != nil {
			return c, nil
		}
		// The node is not owned by this connection's session: it was made
		// by a session that has since expired. Delete it and start over.
		e.drop(node)
	}
}

// adopt reads the node just created and makes it the current candidacy if
// its owner is the connection's current session (P4, CURATOR-696). It
// returns nil, nil when the node is gone or owned by another session.
func (e *Elector) adopt(ctx context.Context, node, guid string, queue int32) (*candidacy, error) {
	var ok bool
	var st *gozk.Stat
	var err error
	sid := e.conn.SessionID()
	if derr := e.do(ctx, e.closing, func() { ok, st, err = e.conn.Exists(node) }); derr != nil {
		e.drop(node)
		return nil, derr
	}
	if err != nil || !ok || st.EphemeralOwner != sid || sid == 0 || e.conn.SessionID() != sid {
		if err != nil && !errors.Is(err, gozk.ErrConnectionClosed) && !errors.Is(err, gozk.ErrSessionExpired) && !errors.Is(err, gozk.ErrNoServer) {
			e.drop(node)
			return nil, fmt.Errorf("zk election %s: reading node %s: %w", e.path, node, err)
		}
		return nil, nil
	}
	name := node[strings.LastIndexByte(node, '/')+1:]
	seq, _ := sequence(name)
	c := &candidacy{node: node, name: name, guid: guid, seq: seq, session: sid, queue: queue,
		self:   child{name: name, seq: seq, prio: e.o.Priority},
		leader: election.Leader{ID: e.o.ID, Value: e.o.Value, Priority: e.o.Priority, Token: uint64(st.Czxid)},
		stop:   make(chan struct{})}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		e.drop(node) // Close waits for this Campaign before its last deletes
		return nil, election.ErrClosed
	}
	e.cand = c
	e.mu.Unlock()
	return c, nil
}

// findAndDrop is called when a create was abandoned (ctx or Close): the
// create may still succeed, so its node, if found by GUID, is deleted;
// failing that, it is deleted with the session. It returns err.
func (e *Elector) findAndDrop(guid string, err error) error {
	e.mu.Lock()
	closed := e.closed
	if !closed {
		e.wg.Add(1)
	}
	e.mu.Unlock()
	e.mu.Lock()
	if e.abandoned == nil {
		e.abandoned = map[string]bool{}
	}
	e.abandoned[guid] = true
	e.mu.Unlock()
	// find looks for the node until the answer is certain: a node left by
	// an abandoned create, owned by this live session, would otherwise
	// sit in the order for as long as the session lives, and the election
	// would wait behind it.
	find := func() {
		delay := retryDelay
		for {
			ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
			node, ferr := e.findGUID(ctx, guid)
			cancel()
			switch {
			case ferr == nil:
				e.mu.Lock()
				delete(e.abandoned, guid)
				e.mu.Unlock()
				if node != "" {
					e.drop(node)
				}
				return
			case e.bg.Err() != nil, e.finalErr("looking for an abandoned node", ferr) != nil:
				return // Close deletes what is pending; the node goes with the session at the latest
			}
			e.retryLog("looking for the node of an abandoned create", ferr)
			clock.Sleep(e.bg, delay)
			delay = min(2*delay, time.Second)
		}
	}
	if closed {
		return err // Close waits for this Campaign, then looks for the node and deletes it
	}
	// Off the caller's path: Campaign returns with its ctx, whatever the
	// server does; Close waits for this.
	go func() {
		defer e.wg.Done()
		find()
	}()
	return err
}

// dropAbandoned looks, until ctx ends, for the nodes of the creates given
// up before their reply, and deletes those it finds. Close calls it: the
// connection may be the caller's and outlive the Elector, and with it the
// session that owns such a node, which would head the order for nobody.
// Requests on a connection are carried out in the order sent, so a listing
// sent now sees every create sent before it.
func (e *Elector) dropAbandoned(ctx context.Context) {
	delay := retryDelay
	for {
		e.mu.Lock()
		n := len(e.abandoned)
		e.mu.Unlock()
		if n == 0 {
			return
		}
		var names []string
		var err error
		if derr := e.do(ctx, nil, func() { names, _, err = e.conn.Children(e.path) }); derr != nil {
			return
		}
		if errors.Is(err, gozk.ErrNoNode) {
			err, names = nil, nil
		}
		if err == nil {
			for _, name := range names {
				if e.wasAbandoned(name) {
					e.mu.Lock()
					e.pending = append(e.pending, pend{node: e.path + "/" + name}) // deleted next, by Close
					e.mu.Unlock()
				}
			}
			e.mu.Lock()
			clear(e.abandoned) // the rest were never created
			e.mu.Unlock()
			return
		}
		if e.finalErr("looking for the nodes of abandoned creates", err) != nil {
			return
		}
		e.retryLog("looking for the nodes of abandoned creates", err)
		clock.Sleep(ctx, delay)
		delay = min(2*delay, time.Second)
	}
}

// wasAbandoned reports whether name is the node of an abandoned create,
// and forgets its GUID.
func (e *Elector) wasAbandoned(name string) bool {
	g := guidOf(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	if g == "" || !e.abandoned[g] {
		return false
	}
	delete(e.abandoned, g)
	return true
}

// findGUID returns the child of the election path whose name carries guid,
// or "" if there is none.
func (e *Elector) findGUID(ctx context.Context, guid string) (string, error) {
	var names []string
	var err error
	if derr := e.do(ctx, nil, func() { names, _, err = e.conn.Children(e.path) }); derr != nil {
		return "", derr
	}
	if errors.Is(err, gozk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if guidOf(n) == guid {
			return e.path + "/" + n, nil
		}
	}
	return "", nil
}

// findGUIDRetry is findGUID, retried until it answers or waiting must
// stop.
func (e *Elector) findGUIDRetry(ctx context.Context, guid string) (string, error) {
	for {
		found, err := e.findGUID(ctx, guid)
		if err == nil {
			return found, nil
		}
		if ferr := e.finalErr("looking for the candidate node just created", err); ferr != nil {
			return "", ferr
		}
		e.retryLog("looking for the candidate node just created", err)
		if perr := e.pause(ctx, nil, retryDelay); perr != nil {
			return "", perr
		}
	}
}

// ensurePath creates the election path and its missing parents, and the
// queue node under it, as persistent nodes with the PathACL.
func (e *Elector) ensurePath(ctx context.Context) error {
	segs := strings.Split(e.path[1:], "/")
	var paths []string
	for i := range segs {
		paths = append(paths, "/"+strings.Join(segs[:i+1], "/"))
	}
	for _, p := range append(paths, e.path+"/"+queueName) {
		var err error
		if derr := e.do(ctx, e.closing, func() { _, err = e.conn.Create(p, nil, 0, e.cfg.PathACL) }); derr != nil {
			return derr
		}
		switch {
		case err == nil, errors.Is(err, gozk.ErrNodeExists):
		case errors.Is(err, gozk.ErrConnectionClosed), errors.Is(err, gozk.ErrNoServer), errors.Is(err, gozk.ErrSessionExpired):
			return nil // the caller retries the create, and so this
		default:
			return fmt.Errorf("zk election %s: creating %s: %w", e.path, p, err)
		}
	}
	return nil
}
