package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/electkit/election/classic/sim"
)

// The chart: election messages against N for every algorithm classic/sim
// lists, failure-free, N = 4 to 4,096 (powers of two), best case, average
// over chartSeeds typical runs, worst case.
const (
	chartMinN  = 4
	chartMaxN  = 4096
	chartSeeds = 5
)

// chartLine is one algorithm's figures: per N, best, average, worst (NaN
// where not run).
type chartLine struct {
	alg              sim.Algorithm
	ns               []int
	best, avg, worst []float64
	lo, hi           []float64 // the fewest and most messages of any run
}

// writeChart runs every algorithm and writes the chart to file, printing
// the figures to w as it goes.
func writeChart(w io.Writer, file string, seed uint64) error {
	var lines []chartLine
	fmt.Fprintf(w, "%-8s %6s %12s %12s %12s\n", "algo", "N", "best", "average", "worst")
	for _, a := range sim.Algorithms() {
		l := chartLine{alg: a}
		for n := chartMinN; n <= chartMaxN; n *= 2 {
			if a.MaxN > 0 && n > a.MaxN {
				break
			}
			best, worst := math.NaN(), math.NaN()
			var err error
			if a.Best != nil {
				if best, err = chartRun(a, n, a.Best(n), seed, 1); err != nil {
					return err
				}
			}
			if a.Worst != nil {
				if worst, err = chartRun(a, n, a.Worst(n), seed, 1); err != nil {
					return err
				}
			}
			sum := 0.0
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, v := range []float64{best, worst} {
				if !math.IsNaN(v) {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
			rng := rand.New(rand.NewPCG(seed, uint64(n)))
			for s := range chartSeeds {
				m, err := chartRun(a, n, a.TypicalCase(n, rng), seed+uint64(s), 3)
				if err != nil {
					return err
				}
				sum += m
				lo, hi = math.Min(lo, m), math.Max(hi, m)
			}
			avg := sum / chartSeeds
			l.ns = append(l.ns, n)
			l.best, l.avg, l.worst = append(l.best, best), append(l.avg, avg), append(l.worst, worst)
			l.lo, l.hi = append(l.lo, lo), append(l.hi, hi)
			fmt.Fprintf(w, "%-8s %6d %12.0f %12.0f %12.0f\n", a.Name, n, best, avg, worst)
		}
		lines = append(lines, l)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	b := bufio.NewWriter(f)
	drawChart(b, lines)
	if err := b.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(w, "chart: %s\n", file)
	return nil
}

// chartRun runs one case and returns its election messages.
func chartRun(a sim.Algorithm, n int, c sim.Case, seed uint64, maxDelay int64) (float64, error) {
	s, st, err := a.RunCase(n, c, sim.Config{Seed: seed, MinDelay: 1, MaxDelay: maxDelay}, simHeartbeatTicks, simTimeoutTicks+4*int(maxDelay))
	if err != nil {
		return 0, fmt.Errorf("%s, N=%d, %s: %w", a.Name, n, c.What, err)
	}
	if err := s.Err(); err != nil {
		return 0, fmt.Errorf("%s, N=%d, %s: %w", a.Name, n, c.What, err)
	}
	if _, ok := s.Settled(); st != sim.StopQuiet || !ok {
		return 0, fmt.Errorf("%s, N=%d, %s: the nodes did not settle (stopped: %v)", a.Name, n, c.What, st)
	}
	return float64(s.Counts().Election().Sent), nil
}

var chartColours = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"}

func drawChart(b *bufio.Writer, lines []chartLine) {
	const (
		W, H                   = 1000.0, 680.0
		left, right, top, bott = 90.0, 300.0, 90.0, 70.0
	)
	f := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	ymax := 1.0
	for _, l := range lines {
		for i := range l.ns {
			for _, v := range []float64{l.best[i], l.avg[i], l.worst[i]} {
				if !math.IsNaN(v) {
					ymax = math.Max(ymax, v)
				}
			}
		}
	}
	yTop := math.Ceil(math.Log10(ymax))
	yBot := 0.0 // 10^0
	xLo, xHi := math.Log2(chartMinN), math.Log2(chartMaxN)
	px := func(n int) float64 { return left + (W-left-right)*(math.Log2(float64(n))-xLo)/(xHi-xLo) }
	py := func(v float64) float64 {
		return H - bott - (H-top-bott)*(math.Log10(math.Max(v, 1))-yBot)/(yTop-yBot)
	}
	f(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif">`+"\n", W, H, W, H)
	f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	f(`<text x="%.0f" y="34" font-size="21" font-weight="bold">Election messages against N, failure-free runs</text>`+"\n", left)
	f(`<text x="%.0f" y="58" font-size="13" fill="#444">line: average over %d seeds (random order, one random initiator; hs: all initiate; tree: on a ladder; delays 1–3 ticks)</text>`+"\n", left, chartSeeds)
	f(`<text x="%.0f" y="76" font-size="13" fill="#444">dashed: the best case, dotted: the worst case, as the seeds define them; band: the fewest to the most of any run; chubby = zab</text>`+"\n", left)
	// Axes and grid.
	for e := yBot; e <= yTop; e++ {
		y := py(math.Pow(10, e))
		f(`<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#e5e5e5"/>`, left, y, W-right, y)
		f(`<text x="%.0f" y="%.1f" font-size="12" text-anchor="end" fill="#555">%s</text>`+"\n", left-8, y+4, pow10Label(int(e)))
	}
	for n := chartMinN; n <= chartMaxN; n *= 2 {
		x := px(n)
		f(`<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#e5e5e5"/>`, x, float64(top), x, H-bott)
		f(`<text x="%.1f" y="%.0f" font-size="12" text-anchor="middle" fill="#555">%d</text>`+"\n", x, H-bott+18, n)
	}
	f(`<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#888"/>`+"\n", left, top, W-left-right, H-top-bott)
	f(`<text x="%.0f" y="%.0f" font-size="14" text-anchor="middle">N (nodes)</text>`+"\n", left+(W-left-right)/2, H-20)
	f(`<text x="24" y="%.0f" font-size="14" text-anchor="middle" transform="rotate(-90 24 %.0f)">election messages</text>`+"\n", top+(H-top-bott)/2, top+(H-top-bott)/2)
	path := func(ns []int, vs []float64) string {
		var sb strings.Builder
		for i, n := range ns {
			if math.IsNaN(vs[i]) {
				continue
			}
			cmd := "L"
			if sb.Len() == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&sb, "%s%.1f,%.1f ", cmd, px(n), py(vs[i]))
		}
		return sb.String()
	}
	for k, l := range lines {
		c := chartColours[k%len(chartColours)]
		// Band from best to worst.
		var band strings.Builder
		ok := true // every N has a run
		for i, n := range l.ns {
			cmd := "L"
			if i == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&band, "%s%.1f,%.1f ", cmd, px(n), py(l.lo[i]))
		}
		for i := len(l.ns) - 1; i >= 0; i-- {
			fmt.Fprintf(&band, "L%.1f,%.1f ", px(l.ns[i]), py(l.hi[i]))
		}
		if ok && len(l.ns) > 0 {
			f(`<path d="%sZ" fill="%s" opacity="0.13"/>`+"\n", band.String(), c)
		}
		f(`<path d="%s" fill="none" stroke="%s" stroke-width="1.3" stroke-dasharray="6,4"/>`+"\n", path(l.ns, l.best), c)
		f(`<path d="%s" fill="none" stroke="%s" stroke-width="1.3" stroke-dasharray="2,3"/>`+"\n", path(l.ns, l.worst), c)
		f(`<path d="%s" fill="none" stroke="%s" stroke-width="2.6"/>`+"\n", path(l.ns, l.avg), c)
		for i, n := range l.ns {
			f(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`, px(n), py(l.avg[i]), c)
		}
		f("\n")
		// Legend.
		y := top + 14 + float64(k)*46
		lx := W - right + 20
		f(`<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="3"/>`, lx, y, lx+26, y, c)
		f(`<text x="%.0f" y="%.0f" font-size="14" font-weight="bold" fill="%s">%s</text>`+"\n", lx+34, y+5, c, esc(l.alg.Name))
		t1, t2 := split(l.alg.Title, 38)
		f(`<text x="%.0f" y="%.0f" font-size="11" fill="#444">%s</text>`+"\n", lx+34, y+20, esc(t1))
		if l.alg.MaxN > 0 {
			t2 = strings.TrimSpace(t2 + fmt.Sprintf(" (up to N = %d)", l.alg.MaxN))
		}
		f(`<text x="%.0f" y="%.0f" font-size="11" fill="#444">%s</text>`+"\n", lx+34, y+33, esc(t2))
	}
	f(`<text x="%.0f" y="%.0f" font-size="11" fill="#777">go run ./cmd/elect sim --chart docs/messages.svg</text>`+"\n", W-right+20, H-20)
	f("</svg>\n")
}

func pow10Label(e int) string {
	if e <= 3 {
		return fmt.Sprint(int(math.Pow(10, float64(e))))
	}
	return fmt.Sprintf("1e%d", e)
}

// split cuts s into two lines at a space before n runes.
func split(s string, n int) (string, string) {
	r := []rune(s)
	if len(r) <= n {
		return s, ""
	}
	cut := n
	for cut > 0 && r[cut] != ' ' {
		cut--
	}
	if cut == 0 {
		cut = n
	}
	return string(r[:cut]), strings.TrimSpace(string(r[cut:]))
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
