package record

import (
	"encoding/json"
	"fmt"
)

// TransferRequest is a transfer request as the store backends keep it
// (election.RequestTransfer): the etcd request key's value, the ZooKeeper
// request node's data.
type TransferRequest struct {
	V     int    `json:"v"`
	To    string `json:"to"`              // the target's ID, "" for the best waiting candidate
	Token uint64 `json:"token"`           // the leadership asked to transfer
	By    string `json:"by"`              // the requester's ID
	Error string `json:"error,omitempty"` // the leader's answer when it cannot transfer
	// NoCandidate: Error says that the target is not waiting.
	NoCandidate bool `json:"no_candidate,omitempty"`
}

// EncodeRequest returns r's bytes, version set.
func EncodeRequest(r TransferRequest) []byte {
	r.V = Version
	b, _ := json.Marshal(r) // cannot fail: plain fields
	return b
}

// DecodeRequest reads a transfer request, or says what is wrong with it.
func DecodeRequest(b []byte) (TransferRequest, error) {
	var r TransferRequest
	if err := json.Unmarshal(b, &r); err != nil {
		return r, err
	}
	if r.V != Version {
		return r, fmt.Errorf("request version %d, want %d", r.V, Version)
	}
	return r, nil
}
