package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/normal-oj/noj-materializer/watch"
)

// monitoringDir is the monitoring kit: alert rules, their promtool tests,
// the Grafana dashboard and the scrape config.
var monitoringDir = filepath.Join("..", "..", "deploy", "monitoring")

// promtool returns the path of promtool, or skips the test when it is not
// on PATH, unless MATERIALIZER_TEST_REQUIRE_PROMTOOL is set (as .ci/run
// does), which makes a missing promtool a failure.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err == nil {
		return path
	}
	msg := "promtool not on PATH (Debian: apt-get install prometheus, or extract usr/bin/promtool from its .deb as .ci/run does)"
	if os.Getenv("MATERIALIZER_TEST_REQUIRE_PROMTOOL") != "" {
		t.Fatal(msg + "; MATERIALIZER_TEST_REQUIRE_PROMTOOL is set")
	}
	t.Skip(msg + ": skipping")
	return ""
}

// runPromtool runs promtool with args in the monitoring kit's folder,
// feeding it stdin, and fails the test when it exits non-zero.
func runPromtool(t *testing.T, stdin []byte, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = monitoringDir
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("promtool %s: %v", strings.Join(args, " "), err)
	}
}

// TestAlertRules: the alert rules are valid, their unit tests
// (alerts_test.yml: each alert firing and not firing) pass, and the demo's
// Prometheus configuration loads them.
func TestAlertRules(t *testing.T) {
	runPromtool(t, nil, "check", "rules", "alerts.yml")
	runPromtool(t, nil, "test", "rules", "alerts_test.yml")
	runPromtool(t, nil, "check", "config", "prometheus.yml")
}

// populatedRegistry returns the daemon's registry (newRegistry) with a
// sample in every metric family, and fails the test if a field of
// watch.Metrics still has none, so that a metric added later is linted and
// name-checked too once it is populated here.
func populatedRegistry(t *testing.T) (*prometheus.Registry, *watch.Metrics) {
	t.Helper()
	reg, m := newRegistry()
	m.Events.WithLabelValues("submission", "insert").Add(3)
	m.BadEvents.Inc()
	m.Batches.Add(2)
	m.KeysRecomputed.WithLabelValues("user").Add(2)
	m.KeysRecomputed.WithLabelValues("pair").Add(3)
	m.Writes.WithLabelValues("user").Inc()
	m.Writes.WithLabelValues("entry").Add(2)
	m.WritesSkipped.WithLabelValues("user").Inc()
	m.WritesSkipped.WithLabelValues("entry").Inc()
	m.WritesRejected.Inc()
	m.PenaltyErrors.Inc()
	m.Malformed.WithLabelValues("homework").Inc()
	m.Rebuilds.WithLabelValues("initial").Inc()
	m.Restarts.WithLabelValues("transient").Inc()
	m.Checkpoints.Inc()
	m.LagSeconds.Set(1.5)
	m.StreamOpen.Set(1)
	m.LeaseHeld.Set(1)
	m.LeaseEpoch.Set(7)
	m.MongoDBUp.Set(1)
	m.CacheDeletes.Add(4)
	m.CacheFailures.Inc()
	m.BatchSeconds.Observe(0.02)
	m.UnresolvedPairs.Inc()
	m.Decisions.WithLabelValues("transient", "stream_next", "reopen").Inc()
	m.PendingSubmissions.Set(2)
	m.PendingOldestSeconds.Set(3600)

	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		c, ok := v.Field(i).Interface().(prometheus.Collector)
		if !ok {
			t.Fatalf("watch.Metrics.%s is not a prometheus.Collector", v.Type().Field(i).Name)
		}
		// Drained as it is filled: a vector may hold more series than
		// any buffer (the fault decisions counter exports one per cell
		// of the policy table).
		ch := make(chan prometheus.Metric)
		go func() { c.Collect(ch); close(ch) }()
		n := 0
		for range ch {
			n++
		}
		if n == 0 {
			t.Errorf("watch.Metrics.%s exports no sample: populate it in populatedRegistry", v.Type().Field(i).Name)
		}
	}
	return reg, m
}

// TestMetricsLint: the daemon's /metrics output, served by its own mux
// with every family populated, passes `promtool check metrics`.
func TestMetricsLint(t *testing.T) {
	promtool(t) // skip before doing anything
	reg, m := populatedRegistry(t)
	srv := httptest.NewServer(newMux(reg, &readiness{metrics: m, maxLag: time.Minute}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v", resp.StatusCode, err)
	}
	if !bytes.Contains(body, []byte("materializer_batch_seconds_bucket")) {
		t.Fatalf("GET /metrics: no materializer_batch_seconds_bucket in:\n%s", body)
	}
	runPromtool(t, body, "check", "metrics")
}

// scrapeSeries are the series Prometheus itself adds to every scrape
// target (https://prometheus.io/docs/concepts/jobs_instances/); the kit
// may use them besides what the daemon exports.
var scrapeSeries = []string{"up", "scrape_duration_seconds", "scrape_samples_scraped",
	"scrape_samples_post_metric_relabeling", "scrape_series_added"}

// exportedNames returns every series name the daemon's registry exports,
// with a histogram's and a summary's _bucket, _sum and _count series.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	reg, _ := populatedRegistry(t)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		n := mf.GetName()
		names[n] = true
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[n+"_sum"], names[n+"_count"] = true, true
		}
	}
	for _, n := range scrapeSeries {
		names[n] = true
	}
	return names
}

// TestMonitoringKitMetricsExported: every metric the monitoring kit's
// alert rules and dashboard name, as deploy/monitoring/metrics-used.txt
// lists them, is exported by the daemon's registry or added by Prometheus
// to every scrape. The PromQL side (each expression parses and names only
// listed metrics, the list is exactly what they name, each alert links its
// runbook) is tested in deploy/monitoring, a module of its own so that
// github.com/prometheus/prometheus stays out of this module: `make
// test-monitoring`.
func TestMonitoringKitMetricsExported(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(monitoringDir, "metrics-used.txt"))
	if err != nil {
		t.Fatal(err)
	}
	exported := exportedNames(t)
	var n int
	for _, line := range strings.Split(string(raw), "\n") {
		name := strings.TrimSpace(line)
		if name == "" || strings.HasPrefix(name, "#") {
			continue
		}
		n++
		if !exported[name] {
			t.Errorf("deploy/monitoring/metrics-used.txt: the kit names %s, which the daemon does not export", name)
		}
	}
	if n == 0 {
		t.Fatal("deploy/monitoring/metrics-used.txt lists no metric")
	}
	t.Logf("%d metrics of the kit checked", n)
}
