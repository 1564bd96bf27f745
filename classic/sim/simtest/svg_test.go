package simtest

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/electkit/election/classic"
	"github.com/electkit/election/classic/sim"
)

// svgOut, if set, is where TestWriteSVG leaves its pictures, to look at.
var svgOut = os.Getenv("SIM_SVG_DIR")

// TestWriteSVG draws runs of every listed algorithm and checks that the
// picture is well-formed XML that names every node, marks the leader and
// draws one arrow per election message in the time panel.
func TestWriteSVG(t *testing.T) {
	for _, a := range sim.Algorithms() {
		t.Run(a.Name, func(t *testing.T) {
			const n = 8
			c := a.Worst(n)
			s, _, err := a.RunCase(n, c, sim.Config{Seed: 1, MinDelay: 1, MaxDelay: 2, Record: true}, 5, 20)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := s.WriteSVG(&b, sim.Picture{Title: a.Title, Subtitle: c.What}); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			dec := xml.NewDecoder(strings.NewReader(out))
			for {
				if _, err := dec.Token(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("not well-formed: %v", err)
				}
			}
			for _, m := range s.Members() {
				if !strings.Contains(out, ">N"+itoa(uint64(m.ID))+"<") {
					t.Errorf("node N%d not drawn", m.ID)
				}
			}
			st, ok := s.Settled()
			if !ok || !strings.Contains(out, "leader: N"+itoa(uint64(st.Leader))) || !strings.Contains(out, ">leader<") {
				t.Errorf("leader not marked")
			}
			if got, want := strings.Count(out, "<line x1=")-strings.Count(out, `stroke="#ccc"`)-strings.Count(out, `stroke="#eee"`), int(s.Counts().Election().Sent); got < want {
				t.Errorf("%d arrows for %d election messages", got, want)
			}
			if svgOut != "" {
				os.WriteFile(svgOut+"/"+a.Name+".svg", b.Bytes(), 0o644)
			}
		})
	}
	s, _ := sim.New([]classic.Member{{ID: 1}}, []classic.Node{mustNode(t)}, sim.Config{NoTicks: true})
	if err := s.WriteSVG(io.Discard, sim.Picture{}); !errors.Is(err, sim.ErrNotRecorded) {
		t.Errorf("unrecorded run: %v", err)
	}
}

func mustNode(t *testing.T) classic.Node {
	n, err := classic.NewLCR(classic.Config{ID: 1, Members: []classic.Member{{ID: 1}}, HeartbeatTicks: 1, TimeoutTicks: 2})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
