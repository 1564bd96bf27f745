package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/electkit/election/classic"
)

// Picture says how WriteSVG draws a recorded run.
type Picture struct {
	// Title and Subtitle head the picture (Subtitle: the case, the counts).
	Title, Subtitle string
	// Edges, if set, are the links of the graph the nodes talk over: the
	// nodes are laid out by them (a force-directed layout) instead of on a
	// circle in the members' order, and the links are drawn. Nil: the
	// links of the run's Config.Topology, if it has one.
	Edges [][2]classic.ID
	// FailureDetector draws Heartbeat and Ack messages too.
	FailureDetector bool
}

// ErrNotRecorded is returned by WriteSVG for a run made without
// Config.Record.
var ErrNotRecorded = errors.New("sim: the run was not recorded (Config.Record)")

// Kind colours: the seeds' kinds have fixed ones; others get the next of
// the spare palette in order of first appearance.
var kindColour = map[classic.Kind]string{
	classic.Election:    "#1f77b4",
	classic.Reply:       "#2ca02c",
	classic.Elected:     "#e6550d",
	classic.Coordinator: "#e6550d",
	classic.OK:          "#9467bd",
	classic.Heartbeat:   "#bbbbbb",
	classic.Ack:         "#dddddd",
}

var spareColours = []string{"#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#393b79", "#637939"}

// WriteSVG draws the recorded run as an SVG picture with two panels. Left,
// the nodes on a circle in ring order (or laid out by Picture.Edges), the
// leader the run settled on in gold, crashed nodes grey; an arrow per
// (sender, receiver, kind), thicker the more messages took it, numbered by
// the first message's place in time. Right, the run in time: one lane per
// node, each message an arrow from its sender's lane at its send time to
// its receiver's lane at its arrival time, lost ones dashed and crossed;
// starts, crashes and recoveries marked on the lanes; the time the nodes
// settled marked.
func (s *Sim) WriteSVG(w io.Writer, p Picture) error {
	if !s.cfg.Record {
		return ErrNotRecorded
	}
	if p.Edges == nil {
		p.Edges = edgeList(s.cfg.Topology)
	}
	b := bufio.NewWriter(w)
	d := newDrawing(s, p)
	d.write(b)
	return b.Flush()
}

// edgeList returns g's links, each pair once, in ID order.
func edgeList(g classic.Graph) [][2]classic.ID {
	var es [][2]classic.ID
	for _, a := range g.IDs() {
		nbs := slices.Clone(g[a])
		slices.Sort(nbs)
		for _, b := range nbs {
			if a < b {
				es = append(es, [2]classic.ID{a, b})
			}
		}
	}
	return es
}

type pt struct{ x, y float64 }

type drawing struct {
	s       *Sim
	p       Picture
	msgs    []Sent
	pos     []pt // node centres, left panel
	lane    []float64
	colours map[classic.Kind]string
	kinds   []classic.Kind // in order of first appearance
	counts  map[classic.Kind]int
	leader  classic.ID
	epoch   uint64
	settled bool
	settle  int64
	tmax    int64
}

const (
	svgW     = 1280.0
	svgH     = 720.0
	circleCX = 300.0
	circleCY = 400.0
	circleR  = 220.0
	laneX0   = 640.0
	laneX1   = 1250.0
	laneY0   = 160.0
	laneY1   = 690.0
)

func newDrawing(s *Sim, p Picture) *drawing {
	d := &drawing{s: s, p: p, colours: map[classic.Kind]string{}, counts: map[classic.Kind]int{}}
	for _, m := range s.rec.Messages {
		if m.Election || p.FailureDetector {
			d.msgs = append(d.msgs, m)
		}
	}
	spare := 0
	for _, m := range d.msgs {
		if _, ok := d.colours[m.Kind]; !ok {
			c, ok := kindColour[m.Kind]
			if !ok {
				c = spareColours[spare%len(spareColours)]
				spare++
			}
			d.colours[m.Kind] = c
			d.kinds = append(d.kinds, m.Kind)
		}
		d.counts[m.Kind]++
		d.tmax = max(d.tmax, m.Arrive)
	}
	for _, a := range s.rec.Actions {
		d.tmax = max(d.tmax, a.At)
	}
	if st, ok := s.Settled(); ok {
		d.leader, d.epoch, d.settled, d.settle = st.Leader, st.Epoch, true, st.At
		d.tmax = max(d.tmax, st.At)
	}
	d.tmax = max(d.tmax, 1)
	n := len(s.members)
	d.pos = make([]pt, n)
	if len(p.Edges) > 0 {
		d.pos = s.layout(p.Edges)
	} else {
		for i := range n {
			a := 2*math.Pi*float64(i)/float64(n) - math.Pi/2
			d.pos[i] = pt{circleCX + circleR*math.Cos(a), circleCY + circleR*math.Sin(a)}
		}
	}
	d.lane = make([]float64, n)
	for i := range n {
		if n == 1 {
			d.lane[i] = (laneY0 + laneY1) / 2
		} else {
			d.lane[i] = laneY0 + (laneY1-laneY0)*float64(i)/float64(n-1)
		}
	}
	return d
}

// layout places the nodes by a deterministic force-directed layout
// (Fruchterman and Reingold) of the graph, starting from the circle.
func (s *Sim) layout(edges [][2]classic.ID) []pt {
	n := len(s.members)
	pos := make([]pt, n)
	for i := range n {
		a := 2 * math.Pi * float64(i) / float64(n)
		pos[i] = pt{math.Cos(a), math.Sin(a)}
	}
	var es [][2]int
	for _, e := range edges {
		a, ok1 := s.index.get(e[0])
		b, ok2 := s.index.get(e[1])
		if ok1 && ok2 && a != b {
			es = append(es, [2]int{int(a), int(b)})
		}
	}
	k := math.Sqrt(4.0 / float64(n))
	temp := 0.2
	for range 300 {
		disp := make([]pt, n)
		for i := range n {
			for j := range n {
				if i == j {
					continue
				}
				dx, dy := pos[i].x-pos[j].x, pos[i].y-pos[j].y
				dist := math.Max(math.Hypot(dx, dy), 1e-3)
				f := k * k / dist
				disp[i].x += dx / dist * f
				disp[i].y += dy / dist * f
			}
		}
		for _, e := range es {
			dx, dy := pos[e[0]].x-pos[e[1]].x, pos[e[0]].y-pos[e[1]].y
			dist := math.Max(math.Hypot(dx, dy), 1e-3)
			f := dist * dist / k
			disp[e[0]].x -= dx / dist * f
			disp[e[0]].y -= dy / dist * f
			disp[e[1]].x += dx / dist * f
			disp[e[1]].y += dy / dist * f
		}
		for i := range n {
			l := math.Max(math.Hypot(disp[i].x, disp[i].y), 1e-9)
			step := math.Min(l, temp)
			pos[i].x += disp[i].x / l * step
			pos[i].y += disp[i].y / l * step
		}
		temp *= 0.985
	}
	minX, maxX, minY, maxY := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, q := range pos {
		minX, maxX = math.Min(minX, q.x), math.Max(maxX, q.x)
		minY, maxY = math.Min(minY, q.y), math.Max(maxY, q.y)
	}
	span := math.Max(math.Max(maxX-minX, maxY-minY), 1e-9)
	for i := range pos {
		pos[i] = pt{circleCX - circleR + 2*circleR*(pos[i].x-minX)/span, circleCY - circleR + 2*circleR*(pos[i].y-minY)/span}
	}
	return pos
}

func esc(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	return r.Replace(s)
}

func (d *drawing) write(b *bufio.Writer) {
	s := d.s
	n := len(s.members)
	f := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	f(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif">`+"\n", svgW, svgH, svgW, svgH)
	f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	f("<defs>\n")
	for _, k := range d.kinds {
		f(`<marker id="a-%s" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker>`+"\n", esc(string(k)), d.colours[k])
	}
	f("</defs>\n")
	f(`<text x="20" y="34" font-size="22" font-weight="bold">%s</text>`+"\n", esc(d.p.Title))
	f(`<text x="20" y="58" font-size="14" fill="#444">%s</text>`+"\n", esc(d.p.Subtitle))
	// Outcome line.
	outcome := "the nodes did not settle on a leader"
	if d.settled {
		outcome = fmt.Sprintf("leader: N%d, epoch %d (every live node agrees from t=%d)", d.leader, d.epoch, d.settle)
	}
	f(`<text x="20" y="82" font-size="15" font-weight="bold" fill="#8a6d00">%s</text>`+"\n", esc(outcome))
	// Legend.
	x := 20.0
	for _, k := range d.kinds {
		label := fmt.Sprintf("%s ×%d", k, d.counts[k])
		f(`<line x1="%.1f" y1="104" x2="%.1f" y2="104" stroke="%s" stroke-width="3" marker-end="url(#a-%s)"/>`, x, x+28, d.colours[k], esc(string(k)))
		f(`<text x="%.1f" y="109" font-size="13">%s</text>`+"\n", x+34, esc(label))
		x += 48 + 7.5*float64(len(label))
	}
	f(`<text x="%.1f" y="109" font-size="13" fill="#666">dashed: lost</text>`+"\n", x)

	// Left panel: the nodes and who talked to whom.
	f(`<text x="%.0f" y="705" font-size="14" fill="#444" text-anchor="middle">who sent to whom (number: order of the first such message; thicker: more)</text>`+"\n", circleCX)
	for _, e := range d.p.Edges {
		a, ok1 := s.index.get(e[0])
		c, ok2 := s.index.get(e[1])
		if ok1 && ok2 {
			f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd" stroke-width="2"/>`+"\n", d.pos[a].x, d.pos[a].y, d.pos[c].x, d.pos[c].y)
		}
	}
	type key struct {
		from, to int32
		kind     classic.Kind
	}
	type agg struct {
		count, first int
		lost         int
	}
	aggs := map[key]*agg{}
	var order []key
	for i, m := range d.msgs {
		a, _ := s.index.get(m.From)
		c, _ := s.index.get(m.To)
		k := key{a, c, m.Kind}
		g := aggs[k]
		if g == nil {
			g = &agg{first: i + 1}
			aggs[k] = g
			order = append(order, k)
		}
		g.count++
		if m.Lost != "" {
			g.lost++
		}
	}
	nodeR := math.Max(7, math.Min(20, 600/float64(n)))
	kindIdx := map[classic.Kind]int{}
	for i, k := range d.kinds {
		kindIdx[k] = i
	}
	labels := len(order) <= 80
	for _, k := range order {
		g := aggs[k]
		p0, p1 := d.pos[k.from], d.pos[k.to]
		if k.from == k.to {
			continue
		}
		dx, dy := p1.x-p0.x, p1.y-p0.y
		l := math.Hypot(dx, dy)
		ux, uy := dx/l, dy/l
		// Bend to the right of the direction of travel, more for each
		// kind, so that opposite directions and kinds do not overlap.
		bend := math.Min(l*0.15, 22) * (1 + 1.1*float64(kindIdx[k.kind]))
		mx, my := (p0.x+p1.x)/2+uy*bend, (p0.y+p1.y)/2-ux*bend
		sx, sy := p0.x+ux*nodeR, p0.y+uy*nodeR
		ex, ey := p1.x-ux*(nodeR+2), p1.y-uy*(nodeR+2)
		wd := 1.2 + 1.3*math.Log2(float64(g.count))
		dash := ""
		if g.lost == g.count {
			dash = ` stroke-dasharray="5,4"`
		}
		f(`<path d="M%.1f,%.1f Q%.1f,%.1f %.1f,%.1f" fill="none" stroke="%s" stroke-width="%.1f" opacity="0.85"%s marker-end="url(#a-%s)"/>`+"\n",
			sx, sy, mx, my, ex, ey, d.colours[k.kind], wd, dash, esc(string(k.kind)))
		if labels {
			lx, ly := (sx+2*mx+ex)/4, (sy+2*my+ey)/4
			txt := fmt.Sprint(g.first)
			if g.count > 1 {
				txt += fmt.Sprintf(" ×%d", g.count)
			}
			f(`<text x="%.1f" y="%.1f" font-size="10" fill="%s" text-anchor="middle" stroke="white" stroke-width="3" paint-order="stroke">%s</text>`+"\n", lx, ly+3, d.colours[k.kind], txt)
		}
	}
	for i, m := range s.members {
		fill, stroke, sw, tc := "#ffffff", "#333", 1.5, "#000"
		dash := ""
		switch {
		case !s.up[i]:
			fill, stroke, tc, dash = "#e0e0e0", "#999", "#888", ` stroke-dasharray="3,2"`
		case d.settled && m.ID == d.leader:
			fill, stroke, sw = "#ffd54f", "#b8860b", 4
		}
		q := d.pos[i]
		f(`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s" stroke="%s" stroke-width="%.1f"%s/>`+"\n", q.x, q.y, nodeR, fill, stroke, sw, dash)
		fs := math.Max(7, math.Min(13, nodeR*0.75))
		f(`<text x="%.1f" y="%.1f" font-size="%.1f" text-anchor="middle" fill="%s">N%d</text>`+"\n", q.x, q.y+fs*0.35, fs, tc, m.ID)
		// Notes go outside the circle, away from the arrows.
		ox, oy := q.x-circleCX, q.y-circleCY
		if ol := math.Hypot(ox, oy); ol > 1 {
			ox, oy = ox/ol, oy/ol
		} else {
			ox, oy = 0, -1
		}
		nx, ny := q.x+ox*(nodeR+30), q.y+oy*(nodeR+22)+4
		if !s.up[i] {
			f(`<text x="%.1f" y="%.1f" font-size="12" font-weight="bold" text-anchor="middle" fill="#c00">down</text>`+"\n", nx, ny)
		} else if d.settled && m.ID == d.leader {
			f(`<text x="%.1f" y="%.1f" font-size="13" font-weight="bold" text-anchor="middle" fill="#8a6d00">leader</text>`+"\n", nx, ny)
		}
	}

	// Right panel: the run in time.
	tx := func(t int64) float64 { return laneX0 + 40 + (laneX1-laneX0-50)*float64(t)/float64(d.tmax) }
	f(`<text x="%.0f" y="130" font-size="14" fill="#444" text-anchor="middle">the run in time (→ ticks): each arrow one message, sender to receiver</text>`+"\n", (laneX0+laneX1)/2)
	laneFont := math.Max(6, math.Min(12, (laneY1-laneY0)/float64(max(n, 2))*0.8))
	for i, m := range s.members {
		y := d.lane[i]
		col := "#ccc"
		if d.settled && m.ID == d.leader {
			f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#fff3c4"/>`+"\n", laneX0+40, y-laneFont*0.6, laneX1-laneX0-50, laneFont*1.2)
			col = "#b8860b"
		}
		f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1"/>`, laneX0+40, y, laneX1-10, y, col)
		f(`<text x="%.1f" y="%.1f" font-size="%.1f" text-anchor="end">N%d</text>`+"\n", laneX0+34, y+laneFont*0.35, laneFont, m.ID)
	}
	// Time axis.
	step := niceStep(d.tmax)
	for t := int64(0); t <= d.tmax; t += step {
		f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`, tx(t), laneY0-8, tx(t), laneY1+4)
		f(`<text x="%.1f" y="%.1f" font-size="10" fill="#888" text-anchor="middle">%d</text>`+"\n", tx(t), laneY1+16, t)
	}
	for _, m := range d.msgs {
		a, _ := s.index.get(m.From)
		c, _ := s.index.get(m.To)
		x0, y0 := tx(m.At), d.lane[a]
		x1, y1 := tx(m.Arrive), d.lane[c]
		if m.Lost != "" && m.Arrive == m.At {
			x1, y1 = x0+6, y0+(y1-y0)*0.3
		}
		dash := ""
		if m.Lost != "" {
			dash = ` stroke-dasharray="4,3"`
		}
		f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.3" opacity="0.8"%s marker-end="url(#a-%s)"/>`+"\n",
			x0, y0, x1, y1, d.colours[m.Kind], dash, esc(string(m.Kind)))
		if m.Lost != "" {
			f(`<text x="%.1f" y="%.1f" font-size="11" fill="#c00" text-anchor="middle">×</text>`+"\n", x1, y1+4)
		}
	}
	for _, a := range s.rec.Actions {
		if a.Op == OpPartition || a.Op == OpHeal {
			f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c00" stroke-dasharray="2,3"/>`, tx(a.At), laneY0-8, tx(a.At), laneY1)
			f(`<text x="%.1f" y="%.1f" font-size="11" fill="#c00">%s</text>`+"\n", tx(a.At)+3, laneY0-10, a.Op)
			continue
		}
		i, ok := s.index.get(a.ID)
		if !ok {
			continue
		}
		x, y := tx(a.At), d.lane[i]
		switch a.Op {
		case OpCrash:
			f(`<text x="%.1f" y="%.1f" font-size="16" font-weight="bold" fill="#c00" text-anchor="middle">✕</text>`, x, y+5)
		case OpStart:
			f(`<path d="M%.1f,%.1f l9,5 l-9,5 z" fill="#2ca02c"/>`, x-4, y-5)
		default:
			f(`<circle cx="%.1f" cy="%.1f" r="4" fill="#2ca02c"/>`, x, y)
		}
		f(`<text x="%.1f" y="%.1f" font-size="10" fill="#555">%s</text>`+"\n", x+6, y-6, a.Op)
	}
	if d.settled {
		x := tx(d.settle)
		f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#b8860b" stroke-width="2" stroke-dasharray="6,3"/>`, x, laneY0-8, x, laneY1+4)
		f(`<text x="%.1f" y="%.1f" font-size="12" fill="#8a6d00" text-anchor="end">settled t=%d</text>`+"\n", x-3, laneY0-10, d.settle)
	}
	f("</svg>\n")
}

// niceStep picks a tick spacing for an axis up to tmax: 1, 2 or 5 × 10^k,
// about ten marks.
func niceStep(tmax int64) int64 {
	raw := float64(tmax) / 10
	p := math.Pow(10, math.Floor(math.Log10(math.Max(raw, 1))))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return max(int64(m*p), 1)
		}
	}
	return max(int64(10*p), 1)
}
