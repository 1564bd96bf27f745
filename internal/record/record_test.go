package record

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/electkit/election"
)

func TestRoundTrip(t *testing.T) {
	o, err := election.NewOptions(election.WithID("node-1"), election.WithPriority(7), election.WithValue([]byte("10.0.0.1:80")))
	if err != nil {
		t.Fatal(err)
	}
	data := Encode(o, []byte("v2"))
	l, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if l.ID != "node-1" || l.Priority != 7 || string(l.Value) != "v2" || l.Token != 0 {
		t.Errorf("Decode(Encode) = %+v", l)
	}
	if ID(data) != "node-1" || ID([]byte("x")) != "" {
		t.Errorf("ID = %q, %q", ID(data), ID([]byte("x")))
	}
}

// A mark's head flag reads back; a leader's record and an earlier
// version's mark carry none, and Decode reads a mark as the candidate's
// record.
func TestMarkHead(t *testing.T) {
	o, err := election.NewOptions(election.WithID("node-1"), election.WithPriority(-2))
	if err != nil {
		t.Fatal(err)
	}
	const lkey = "/svc/_l/0000000000000009-0000000000000abc-0000002a"
	head, other := EncodeMark(o, []byte("v"), lkey, true), EncodeMark(o, []byte("v"), lkey, false)
	for _, c := range []struct {
		data []byte
		key  string
		head bool
	}{
		{head, lkey, true},
		{other, lkey, false},
		{EncodeLeader(o, []byte("v"), lkey), lkey, false},
		{[]byte(`{"head":true}x`), "", false},
	} {
		if key, h := Mark(c.data); key != c.key || h != c.head {
			t.Errorf("Mark(%s) = %q, %t; want %q, %t", c.data, key, h, c.key, c.head)
		}
	}
	if string(other) != string(EncodeLeader(o, []byte("v"), lkey)) {
		t.Errorf("a mark without head = %s, want the leader record %s", other, EncodeLeader(o, []byte("v"), lkey))
	}
	if l, err := Decode(head); err != nil || l.ID != "node-1" || l.Priority != -2 || string(l.Value) != "v" || Key(head) != lkey {
		t.Errorf("Decode(%s) = %+v, %v; Key = %q", head, l, err, Key(head))
	}
}

func TestDecodeRefuses(t *testing.T) {
	for data, want := range map[string]string{
		`garbage`:          "not a candidate record",
		`{"v":2,"id":"a"}`: "record version 2, want 1",
		`{"v":1,"id":""}`:  "record:",
		`{"v":1,"id":"a","value":"` + base64.StdEncoding.EncodeToString(make([]byte, election.MaxValueSize+1)) + `"}`: "exceeds",
	} {
		if _, err := Decode([]byte(data)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode(%.30q) = %v, want an error with %q", data, err, want)
		}
	}
}
