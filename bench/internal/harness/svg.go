package harness

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

var palette = []string{"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"}

// SVG draws one panel per store and case of the handover and crash
// scenarios: the empirical CDF of each library's samples (and the floor's)
// on a logarithmic time axis.
func (r *Report) SVG() string {
	type panel struct {
		title string
		ds    []*Dist
	}
	var panels []*panel
	index := map[string]*panel{}
	colors := map[string]string{}
	for _, d := range r.Dists {
		if _, ok := colors[d.Lib]; !ok {
			colors[d.Lib] = palette[len(colors)%len(palette)]
		}
		if len(d.MS) == 0 {
			continue
		}
		key := d.Scenario + "|" + d.Store + "|" + d.Case
		p, ok := index[key]
		if !ok {
			p = &panel{title: fmt.Sprintf("%s — %s — %s", d.Scenario, d.Store, d.Case)}
			index[key] = p
			panels = append(panels, p)
		}
		p.ds = append(p.ds, d)
	}
	const pw, ph, cols = 360, 250, 4
	const ml, mr, mt, mb = 44, 12, 26, 78
	rows := (len(panels) + cols - 1) / cols
	W, H := cols*pw, max(1, rows)*ph+40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="10">`+"\n", W, H, W, H)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	fmt.Fprintf(&b, `<text x="8" y="20" font-size="14">Handover and crash failover: cumulative share of samples (y) by time in ms (x, log scale) — %s, %s</text>`+"\n", html.EscapeString(r.Date), html.EscapeString(r.Mode))
	if len(panels) == 0 {
		b.WriteString(`<text x="8" y="36">no samples</text>`)
	}
	for i, p := range panels {
		x0, y0 := float64((i%cols)*pw), float64(40+(i/cols)*ph)
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, d := range p.ds {
			for _, v := range d.MS {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		lo, hi = math.Max(lo*0.8, 0.01), hi*1.25
		if hi/lo < 2 {
			lo, hi = lo/1.5, hi*1.5
		}
		lx0, lx1 := math.Log10(lo), math.Log10(hi)
		plotW, plotH := float64(pw-ml-mr), float64(ph-mt-mb)
		X := func(v float64) float64 { return x0 + ml + (math.Log10(math.Max(v, lo))-lx0)/(lx1-lx0)*plotW }
		Y := func(f float64) float64 { return y0 + mt + (1-f)*plotH }
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11">%s</text>`+"\n", x0+6, y0+14, html.EscapeString(p.title))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", x0+ml, y0+mt, plotW, plotH)
		for _, f := range []float64{0, 0.5, 0.9, 1} {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%g</text>`+"\n", x0+ml, Y(f), x0+ml+plotW, Y(f), x0+ml-4, Y(f)+3, f)
		}
		for e := math.Floor(lx0); e <= lx1; e++ {
			for _, m := range []float64{1, 2, 5} {
				v := m * math.Pow(10, e)
				if v < lo || v > hi {
					continue
				}
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="middle">%g</text>`+"\n", X(v), y0+mt, X(v), y0+mt+plotH, X(v), y0+mt+plotH+12, v)
			}
		}
		for k, d := range p.ds {
			s := slices.Clone(d.MS)
			slices.Sort(s)
			var pts []string
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", X(s[0]), Y(0)))
			for j, v := range s {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", X(v), Y(float64(j)/float64(len(s))), X(v), Y(float64(j+1)/float64(len(s)))))
			}
			dash := ""
			if d.Role == "floor" {
				dash = ` stroke-dasharray="4 3"`
			}
			c := colors[d.Lib]
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6"%s points="%s"/>`+"\n", c, dash, strings.Join(pts, " "))
			ly := y0 + mt + plotH + 26 + float64(k)*11
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/><text x="%.1f" y="%.1f">%s (n=%d, p50 %s ms)</text>`+"\n",
				x0+ml, ly-3, x0+ml+18, ly-3, c, dash, x0+ml+22, ly, html.EscapeString(d.Lib), len(d.MS), ms(d.Q(0.5)))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
