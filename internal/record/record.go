// Package record is the candidate record both stores keep in a
// candidate's key (etcd) or node (ZooKeeper): a JSON object
// {"v":1,"id":…,"priority":…,"value":…} naming the candidate. The
// backends of this module import it; the layout is part of the stores'
// documented key format, so a change is a new Version.
package record

import (
	"fmt"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

// Version is the record format written, and the only one read.
const Version = 1

type record struct {
	V        int    `json:"v"`
	ID       string `json:"id"`
	Priority int64  `json:"priority"`
	Value    []byte `json:"value,omitempty"`
	Key      string `json:"key,omitempty"` // etcd's leader key: the queue key of the candidate that holds it
	// Head, in etcd's hand-over mark: the hand-over was a release to the
	// candidate next in line, which heads the queue (nothing of its
	// priority or above is queued ahead of it). Readers of earlier
	// versions pass over it.
	Head bool `json:"head,omitempty"`
}

// Encode returns the record of the candidate o with value.
func Encode(o election.Options, value []byte) []byte {
	return encode(record{V: Version, ID: o.ID, Priority: o.Priority, Value: value})
}

// EncodeLeader returns the record of the candidate o with value, naming
// key: the record of etcd's leader key, which says whose queue key it
// stands for.
func EncodeLeader(o election.Options, value []byte, key string) []byte {
	return encode(record{V: Version, ID: o.ID, Priority: o.Priority, Value: value, Key: key})
}

// EncodeMark returns the record of etcd's hand-over mark: the record of
// the candidate o with value, naming key, the leadership key the
// hand-over made for it; head says that the candidate heads the queue
// (a release to the candidate next in line).
func EncodeMark(o election.Options, value []byte, key string, head bool) []byte {
	return encode(record{V: Version, ID: o.ID, Priority: o.Priority, Value: value, Key: key, Head: head})
}

// Mark returns what a hand-over mark's record (EncodeMark) says, in one
// decode: the leadership key it names, or "" (not a record), and whether
// its candidate heads the queue.
func Mark(data []byte) (key string, head bool) {
	r, err := decode(data)
	if err != nil {
		return "", false
	}
	return r.Key, r.Head
}

// Key returns the queue key a leader record names, or "".
func Key(data []byte) string {
	r, err := decode(data)
	if err != nil {
		return ""
	}
	return r.Key
}

// Decode checks data and returns the leader it names (ID, Value,
// Priority; no Token: that comes from the store), or what is wrong with
// it, in words a MalformedKeyError or MalformedNodeError can carry.
func Decode(data []byte) (election.Leader, error) {
	r, err := decode(data)
	if err != nil {
		return election.Leader{}, fmt.Errorf("not a candidate record: %v", err)
	}
	if r.V != Version {
		return election.Leader{}, fmt.Errorf("record version %d, want %d", r.V, Version)
	}
	if err := backend.ValidateID(r.ID); err != nil {
		return election.Leader{}, fmt.Errorf("record: %v", err)
	}
	if len(r.Value) > election.MaxValueSize {
		return election.Leader{}, fmt.Errorf("record value of %d bytes exceeds %d", len(r.Value), election.MaxValueSize)
	}
	return election.Leader{ID: r.ID, Value: r.Value, Priority: r.Priority}, nil
}

// ID returns the candidate ID data names, or "" if data is not a record.
func ID(data []byte) string {
	r, err := decode(data)
	if err != nil {
		return ""
	}
	return r.ID
}
