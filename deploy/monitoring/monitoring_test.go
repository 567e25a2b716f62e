package monitoring

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// usedFile lists, one a line, every metric name the kit's expressions
// name: cmd/materializer's TestMonitoringKitMetricsExported checks that the
// daemon's registry exports each of them (or that Prometheus adds it to
// every scrape), and TestMetricsUsedFile here that the list is exactly what
// the expressions name.
const usedFile = "metrics-used.txt"

// listed returns the names in usedFile.
func listed(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(usedFile)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if n := strings.TrimSpace(sc.Text()); n != "" && !strings.HasPrefix(n, "#") {
			names[n] = true
		}
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
// names a metric not listed in usedFile (exported: the names listed);
// where says where each is.
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
				t.Errorf("%s: %q names %s, which %s does not list (the daemon must export it: add it there, cmd/materializer's tests check it)", where, expr, n, usedFile)
			}
		}
	}
	return used
}

// dashboardExprs returns the dashboard's PromQL expressions by panel
// title and target.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("grafana-dashboard.json")
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
	return exprs
}

// TestDashboardNamesExportedMetrics: every PromQL expression of the
// Grafana dashboard parses and names only metrics the daemon's registry
// exports (those of usedFile).
func TestDashboardNamesExportedMetrics(t *testing.T) {
	exprs := dashboardExprs(t)
	used := checkExprs(t, listed(t), exprs)
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

type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	Annotations map[string]string `yaml:"annotations"`
}

// alertRules returns the rules of alerts.yml.
func alertRules(t *testing.T) []alertRule {
	t.Helper()
	raw, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	var all []alertRule
	for _, g := range rules.Groups {
		all = append(all, g.Rules...)
	}
	return all
}

// TestAlertRulesNameExportedMetrics: every alert expression names only
// metrics the daemon's registry exports (or Prometheus's own scrape
// series; those of usedFile), and every alert links its runbook in
// docs/monitoring.md.
func TestAlertRulesNameExportedMetrics(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	exprs := map[string]string{}
	for _, r := range alertRules(t) {
		exprs[r.Alert] = r.Expr
		// A GitHub heading "### MaterializerLagHigh" has the anchor #materializerlaghigh.
		anchor := strings.ToLower(r.Alert)
		if want := "docs/monitoring.md#" + anchor; !strings.HasSuffix(r.Annotations["runbook_url"], want) {
			t.Errorf("%s: runbook_url %q does not end in %s", r.Alert, r.Annotations["runbook_url"], want)
		}
		if !bytes.Contains(guide, []byte("\n### "+r.Alert+"\n")) {
			t.Errorf("%s: docs/monitoring.md has no heading \"### %s\" (its runbook)", r.Alert, r.Alert)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: needs a summary and a description", r.Alert)
		}
	}
	used := checkExprs(t, listed(t), exprs)
	t.Logf("%d alerts, metrics used: %s", len(exprs), strings.Join(sortedKeys(used), " "))
}

// TestMetricsUsedFile: usedFile lists exactly the metrics the dashboard's
// and the alerts' expressions name, so that cmd/materializer's check of
// the list against the daemon's registry covers every one of them and
// nothing else.
func TestMetricsUsedFile(t *testing.T) {
	used := map[string]bool{}
	exprs := dashboardExprs(t)
	for _, r := range alertRules(t) {
		exprs["alert "+r.Alert] = r.Expr
	}
	for where, expr := range exprs {
		names, err := metricNames(expr)
		if err != nil {
			t.Fatalf("%s: %q: %v", where, expr, err)
		}
		for _, n := range names {
			used[n] = true
		}
	}
	list := listed(t)
	for _, n := range sortedKeys(used) {
		if !list[n] {
			t.Errorf("%s does not list %s, which an expression names", usedFile, n)
		}
	}
	for _, n := range sortedKeys(list) {
		if !used[n] {
			t.Errorf("%s lists %s, which no expression names: remove it", usedFile, n)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
