package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

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

// grafanaVar matches Grafana's built-in interval variables, which stand
// for a duration in a range selector.
var grafanaVar = regexp.MustCompile(`\$__(rate_interval|interval|range)\b`)

// metricNames parses expr as PromQL and returns the metric names its
// selectors name (a selector without a name is an error: it would match
// any metric).
func metricNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVar.ReplaceAllString(expr, "5m"))
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, lm := range vs.LabelMatchers {
			if lm.Name == model.MetricNameLabel && lm.Type == labels.MatchEqual {
				name = lm.Value
			}
		}
		if name == "" {
			bad = &selectorError{vs.String()}
		}
		names = append(names, name)
		return nil
	})
	return names, bad
}

type selectorError struct{ sel string }

func (e *selectorError) Error() string { return "selector " + e.sel + " names no metric" }

// checkExprs fails the test for every expression that does not parse or
// names a metric the daemon does not export; where says where each is.
func checkExprs(t *testing.T, exported map[string]bool, exprs map[string]string) (used map[string]bool) {
	t.Helper()
	if len(exprs) == 0 {
		t.Fatal("no expression found")
	}
	used = map[string]bool{}
	for where, expr := range exprs {
		names, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %q: %v", where, expr, err)
			continue
		}
		for _, n := range names {
			used[n] = true
			if !exported[n] {
				t.Errorf("%s: %q names %s, which the daemon does not export", where, expr, n)
			}
		}
	}
	return used
}

// TestDashboardNamesExportedMetrics: every PromQL expression of the
// Grafana dashboard parses and names only metrics the daemon's registry
// exports.
func TestDashboardNamesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(monitoringDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []dashPanel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	exprs := map[string]string{}
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				exprs[p.Title+"/"+tg.RefID] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	used := checkExprs(t, exportedNames(t), exprs)
	t.Logf("%d expressions, metrics used: %s", len(exprs), strings.Join(sortedKeys(used), " "))
}

type dashPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"` // of a collapsed row
}

// TestAlertRulesNameExportedMetrics: every alert expression names only
// metrics the daemon's registry exports (or Prometheus's own scrape
// series), and every alert links its runbook in docs/operations.md.
func TestAlertRulesNameExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(monitoringDir, "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	exprs := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs[r.Alert] = r.Expr
			// A GitHub heading "#### MaterializerLagHigh" has the anchor #materializerlaghigh.
			anchor := strings.ToLower(r.Alert)
			if want := "docs/operations.md#" + anchor; !strings.HasSuffix(r.Annotations["runbook_url"], want) {
				t.Errorf("%s: runbook_url %q does not end in %s", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !bytes.Contains(guide, []byte("\n#### "+r.Alert+"\n")) {
				t.Errorf("%s: docs/operations.md has no heading \"#### %s\" (its runbook)", r.Alert, r.Alert)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs a summary and a description", r.Alert)
			}
		}
	}
	used := checkExprs(t, exportedNames(t), exprs)
	t.Logf("%d alerts, metrics used: %s", len(exprs), strings.Join(sortedKeys(used), " "))
}
