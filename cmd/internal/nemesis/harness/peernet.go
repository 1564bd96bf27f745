package harness

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// peerNet carries the store members' traffic to each other — etcd's peer
// (Raft) traffic, ZooKeeper's quorum and election ports — through proxies
// of the harness, so that the store-partition and store-minority faults
// can cut members off from each other, both ways, silently (bytes are
// dropped, connections are kept: the members notice by their own
// timeouts, as in a real partition). A proxy knows, for every connection,
// which member dialed it and which member it reaches.
type peerNet struct {
	mu      sync.Mutex
	side    map[int]int // a member's side of the partition; members on different sides are cut off
	members int         // how many members the last split placed
	conns   map[*peerConn]bool
	ls      []net.Listener
	closed  bool
	wg      sync.WaitGroup
}

// peerConn is one connection through a proxy: member from() dialed
// member to.
type peerConn struct {
	// from is the dialing member's index, -1 while the proxy cannot tell:
	// asked at every decision, since a connection opened while the
	// cluster starts may name a member the harness knows only later.
	from func() int
	to   int
	a, b net.Conn // b is nil until the proxy has dialed
}

// closeBoth closes both sides of c.
func (c *peerConn) closeBoth() {
	c.a.Close()
	if c.b != nil {
		c.b.Close()
	}
}

func newPeerNet() *peerNet {
	return &peerNet{side: map[int]int{}, conns: map[*peerConn]bool{}}
}

// cutOff reports whether traffic from member i to member j is cut now.
func (n *peerNet) cutOff(i, j int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cutLocked(i, j)
}

// cutLocked is cutOff under n.mu. A connection whose sender the proxy
// could not tell (i < 0: etcd's lease renewals forwarded to the leader,
// its version checks — requests that name no sender) is cut when every
// other member is on another side than j: then whoever sent it is.
func (n *peerNet) cutLocked(i, j int) bool {
	if len(n.side) == 0 || j < 0 {
		return false
	}
	if i >= 0 {
		return n.side[i] != n.side[j]
	}
	for k := range n.members {
		if k != j && n.side[k] == n.side[j] {
			return false
		}
	}
	return true
}

// split puts each member on a side (sides[i] is member i's); members on
// different sides no longer reach each other.
func (n *peerNet) split(sides []int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.members = len(sides)
	for i, s := range sides {
		n.side[i] = s
	}
}

// heal joins every member again and closes the connections that were cut:
// their streams lost bytes.
func (n *peerNet) heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	// Closed before the sides join, so that no byte read during the cut
	// is forwarded after it.
	for c := range n.conns {
		if n.cutLocked(c.from(), c.to) {
			c.closeBoth()
		}
	}
	clear(n.side)
}

// prelude reads what the dialing member sends first and returns who it is
// (a function, asked at each decision; -1: unknown) and the bytes to send
// on in their place.
type prelude func(r *bufio.Reader) (from func() int, head []byte, err error)

// listen starts a proxy that carries connections to member to, at addr;
// it returns the proxy's address.
func (n *peerNet) listen(to int, addr string, pre prelude) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		l.Close()
		return "", errors.New("peer network closed")
	}
	n.ls = append(n.ls, l)
	n.wg.Add(1)
	n.mu.Unlock()
	go func() {
		defer n.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				n.serve(c, to, addr, pre)
			}()
		}
	}()
	return l.Addr().String(), nil
}

// serve carries one connection to member to.
func (n *peerNet) serve(a net.Conn, to int, addr string, pre prelude) {
	c := &peerConn{from: unknown, to: to, a: a}
	if !n.track(c) {
		return
	}
	defer func() {
		n.mu.Lock()
		delete(n.conns, c)
		n.mu.Unlock()
		c.closeBoth()
	}()
	br := bufio.NewReader(a)
	var head []byte
	if pre != nil {
		_ = a.SetReadDeadline(time.Now().Add(10 * time.Second))
		from, h, err := pre(br)
		if err != nil {
			return
		}
		_ = a.SetReadDeadline(time.Time{})
		head = h
		n.mu.Lock()
		c.from = from
		n.mu.Unlock()
	}
	b, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	n.mu.Lock()
	c.b = b
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return
	}
	if len(head) > 0 && !n.cutOff(c.sender(), to) {
		if _, err := b.Write(head); err != nil {
			return
		}
	}
	done := make(chan struct{})
	go func() {
		n.pipe(b, br, c)
		close(done)
	}()
	n.pipe(a, b, c)
	<-done
}

// track adds c to the connections close closes, unless n is closed.
func (n *peerNet) track(c *peerConn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		c.a.Close()
		return false
	}
	n.conns[c] = true
	return true
}

// sender is c's dialing member now.
func (c *peerConn) sender() int { return c.from() }

// unknown is the sender of a connection whose prelude has not run.
func unknown() int { return -1 }

// pipe copies src to dst, dropping what comes while c's members are cut
// off from each other; when either side ends, it closes both.
func (n *peerNet) pipe(dst io.Writer, src io.Reader, c *peerConn) {
	defer c.closeBoth()
	buf := make([]byte, 32*1024)
	for {
		k, err := src.Read(buf)
		if k > 0 && !n.cutOff(c.sender(), c.to) {
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close stops every proxy and closes every connection.
func (n *peerNet) close() {
	n.mu.Lock()
	n.closed = true
	ls := n.ls
	for c := range n.conns {
		c.closeBoth()
	}
	n.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	n.wg.Wait()
}

// etcdFrom is the prelude of etcd's peer traffic: every request one member
// sends another over Raft's transport (its streams, its pipeline,
// snapshots) names the sender in the X-Server-From header, the member's ID
// in hex; id maps it to the member's index, asked again at each decision
// (the harness learns the IDs only once the cluster runs, after its first
// streams opened). The head is the request as read. Requests that name no
// sender (a lease renewal a follower forwards to the leader, a version
// check) are told apart as peerNet.cutLocked says.
func etcdFrom(id func(hex string) int) prelude {
	return func(r *bufio.Reader) (func() int, []byte, error) {
		var head bytes.Buffer
		hex := ""
		for {
			line, err := r.ReadString('\n')
			head.WriteString(line)
			if err != nil {
				return nil, nil, err
			}
			if head.Len() > 64<<10 {
				return nil, nil, errors.New("request header too long")
			}
			trimmed := strings.TrimRight(line, "\r\n")
			if trimmed == "" {
				if hex == "" {
					return unknown, head.Bytes(), nil
				}
				return func() int { return id(hex) }, head.Bytes(), nil
			}
			if k, v, ok := strings.Cut(trimmed, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "X-Server-From") {
				hex = strings.TrimSpace(v)
			}
		}
	}
}

// ZooKeeper's election protocol versions whose first message carries the
// dialing server's election address (QuorumCnxManager's InitialMessage).
const (
	zkProtocolV1 = -65536
	zkProtocolV2 = -65535
)

// zkElectionPrelude is the prelude of one server's connections to another's
// election port through a proxy of the pair: the dialing server's first
// message names its own election address, which the server it reaches
// dials back on when it has the larger ID (and keeps only that
// connection). Rewritten to back(), the proxy the other way, so that the
// connection kept goes through the harness too. Other versions pass as
// they are.
func zkElectionPrelude(from int, back func() string) prelude {
	sender := func() int { return from }
	return func(r *bufio.Reader) (func() int, []byte, error) {
		var version, sid int64
		if err := binary.Read(r, binary.BigEndian, &version); err != nil {
			return nil, nil, err
		}
		var out bytes.Buffer
		_ = binary.Write(&out, binary.BigEndian, version)
		if version != zkProtocolV1 && version != zkProtocolV2 {
			return sender, out.Bytes(), nil
		}
		var size int32
		if err := binary.Read(r, binary.BigEndian, &sid); err != nil {
			return nil, nil, err
		}
		if err := binary.Read(r, binary.BigEndian, &size); err != nil {
			return nil, nil, err
		}
		if size <= 0 || size > 4096 {
			return nil, nil, fmt.Errorf("election message of %d bytes", size)
		}
		if _, err := io.ReadFull(r, make([]byte, size)); err != nil {
			return nil, nil, err
		}
		_ = binary.Write(&out, binary.BigEndian, sid)
		addr := back()
		_ = binary.Write(&out, binary.BigEndian, int32(len(addr)))
		out.WriteString(addr)
		return sender, out.Bytes(), nil
	}
}

// fixed is the prelude of a proxy that only member from dials.
func fixed(from int) prelude {
	return func(*bufio.Reader) (func() int, []byte, error) { return func() int { return from }, nil, nil }
}

// hexID formats an etcd member ID as its X-Server-From header does.
func hexID(id uint64) string { return strconv.FormatUint(id, 16) }
