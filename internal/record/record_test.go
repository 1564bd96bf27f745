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
