package harness

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// etcd's peer requests name their sender; the prelude finds it and hands
// the request on unchanged.
func TestEtcdFrom(t *testing.T) {
	req := "GET /raft/stream/message/8e9e05c52164694d HTTP/1.1\r\nHost: 127.0.0.1:1\r\nX-Server-From: 91bc3c398fb3c146\r\nX-Raft-To: 8e9e05c52164694d\r\n\r\nbody"
	pre := etcdFrom(func(hex string) int {
		if hex == "91bc3c398fb3c146" {
			return 2
		}
		return -1
	})
	r := bufio.NewReader(strings.NewReader(req))
	from, head, err := pre(r)
	if err != nil || from() != 2 {
		t.Fatalf("from %d, err %v; want 2, nil", from(), err)
	}
	rest, _ := io.ReadAll(r)
	if got := string(head) + string(rest); got != req {
		t.Errorf("forwarded %q; want the request unchanged", got)
	}
	// No sender named (a lease renewal forwarded to the leader).
	from, _, err = pre(bufio.NewReader(strings.NewReader("POST /leases HTTP/1.1\r\nHost: x\r\n\r\n")))
	if err != nil || from() != -1 {
		t.Errorf("from %d, err %v; want -1, nil", from(), err)
	}
	// A sender the harness learns of after the connection opened (the
	// cluster's first streams) is told apart from then on.
	known := false
	late := etcdFrom(func(hex string) int {
		if known && hex == "91bc3c398fb3c146" {
			return 2
		}
		return -1
	})
	from, _, _ = late(bufio.NewReader(strings.NewReader(req)))
	if from() != -1 {
		t.Fatalf("from %d before the IDs are known; want -1", from())
	}
	known = true
	if from() != 2 {
		t.Errorf("from %d once the IDs are known; want 2", from())
	}
}

// ZooKeeper's first election message names the dialer's own election
// address; the prelude puts the proxy the other way in its place.
func TestZKElectionPrelude(t *testing.T) {
	var msg bytes.Buffer
	addr := "127.0.0.1:3888"
	for _, v := range []any{int64(zkProtocolV1), int64(3), int32(len(addr))} {
		_ = binary.Write(&msg, binary.BigEndian, v)
	}
	msg.WriteString(addr)
	msg.WriteString("next")
	r := bufio.NewReader(&msg)
	from, head, err := zkElectionPrelude(1, func() string { return "127.0.0.1:40001" })(r)
	if err != nil {
		t.Fatal(err)
	}
	if from() != 1 {
		t.Fatalf("from %d; want 1", from())
	}
	var want bytes.Buffer
	back := "127.0.0.1:40001"
	for _, v := range []any{int64(zkProtocolV1), int64(3), int32(len(back))} {
		_ = binary.Write(&want, binary.BigEndian, v)
	}
	want.WriteString(back)
	if !bytes.Equal(head, want.Bytes()) {
		t.Errorf("rewritten to %q; want %q", head, want.Bytes())
	}
	if rest, _ := io.ReadAll(r); string(rest) != "next" {
		t.Errorf("left %q unread; want %q", rest, "next")
	}
}

// Members on different sides are cut off, both ways; a sender the proxy
// could not tell is cut only from a member alone on its side.
func TestPeerNetSides(t *testing.T) {
	n := newPeerNet()
	defer n.close()
	if n.cutOff(0, 1) || n.cutOff(-1, 0) {
		t.Fatalf("cut before any split")
	}
	n.split([]int{0, 0, 1})
	for _, c := range []struct {
		from, to int
		cut      bool
	}{{0, 1, false}, {1, 0, false}, {0, 2, true}, {2, 1, true}, {-1, 2, true}, {-1, 0, false}} {
		if got := n.cutOff(c.from, c.to); got != c.cut {
			t.Errorf("cutOff(%d, %d) = %v; want %v", c.from, c.to, got, c.cut)
		}
	}
	n.heal()
	if n.cutOff(0, 2) || n.cutOff(-1, 2) {
		t.Errorf("cut after heal")
	}
}

// Through a proxy: bytes flow, stop while the members are cut off, and
// the connection that lost them is closed at the heal.
func TestPeerNetProxy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // member 1: echoes
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	n := newPeerNet()
	defer n.close()
	addr, err := n.listen(1, l.Addr().String(), fixed(0))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echo := func(s string) error {
		if _, err := c.Write([]byte(s)); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, len(s))
		_, err := io.ReadFull(c, b)
		return err
	}
	if err := echo("hello"); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	n.split([]int{0, 1})
	if _, err := c.Write([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	n.heal()
	// The heal closes the connection: the read ends (EOF) rather than
	// returning the lost bytes.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 4)
	if k, err := c.Read(b); err == nil {
		t.Errorf("read %q after the heal; want the connection closed", b[:k])
	}
}
