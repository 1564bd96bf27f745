package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scrape gathers reg, failing the test on an error (the pedantic registry
// checks every metric against its description).
func scrape(t *testing.T, reg prometheus.Gatherer) []*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	return mfs
}

// find returns the series of family name whose labels include want, or
// nil.
func find(mfs []*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue series
				}
			}
			return m
		}
	}
	return nil
}

// value is the value of a gauge or counter series, or the sample count of
// a histogram; the test fails if the series is not exported.
func value(t *testing.T, mfs []*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := find(mfs, name, labels)
	switch {
	case m == nil:
		t.Fatalf("no series %s%v in the scrape", name, labels)
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	t.Fatalf("series %s%v is of no known type", name, labels)
	return 0
}

// want fails the test unless the series has the value.
func want(t *testing.T, mfs []*dto.MetricFamily, name string, labels map[string]string, v float64) {
	t.Helper()
	if got := value(t, mfs, name, labels); got != v {
		t.Errorf("%s%v = %v, want %v", name, labels, got, v)
	}
}

// absent fails the test if the series is exported.
func absent(t *testing.T, mfs []*dto.MetricFamily, name string, labels map[string]string) {
	t.Helper()
	if m := find(mfs, name, labels); m != nil {
		t.Errorf("%s%v is exported (%v), want it absent", name, labels, m)
	}
}

// lbl builds a label set from name, value pairs.
func lbl(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
