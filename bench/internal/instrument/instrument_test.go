package instrument

import (
	"encoding/binary"
	"testing"
)

func frame(xid int32, body int) []byte {
	b := make([]byte, 4+4+body)
	binary.BigEndian.PutUint32(b, uint32(4+body))
	binary.BigEndian.PutUint32(b[4:], uint32(xid))
	return b
}

// The framer finds every packet's xid however the stream is split, and
// skips the connection's first packet (connect request or response).
func TestFramerSplits(t *testing.T) {
	var stream []byte
	stream = append(stream, frame(0, 40)...) // connect: no xid
	want := []int32{1, -2, -1, 7, -1}
	for i, x := range want {
		stream = append(stream, frame(x, i*3)...)
	}
	stream = append(stream, 0, 0, 0, 0) // an empty packet
	for chunk := 1; chunk <= len(stream); chunk++ {
		var got []int32
		f := framer{on: func(x int32) { got = append(got, x) }}
		for i := 0; i < len(stream); i += chunk {
			f.feed(stream[i:min(len(stream), i+chunk)])
		}
		if len(got) != len(want) {
			t.Fatalf("chunk %d: xids %v, want %v", chunk, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("chunk %d: xids %v, want %v", chunk, got, want)
			}
		}
	}
}
