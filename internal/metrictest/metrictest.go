// Package metrictest reads metrics off a Prometheus registry in tests.
package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Counter returns the value of the unlabelled counter name registered in reg; the test fails
// when reg has no such metric.
func Counter(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
