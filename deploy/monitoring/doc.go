// Package monitoring holds the tests of the monitoring kit in this folder
// (alert rules and Grafana dashboard): every PromQL expression parses and
// names only metrics listed in metrics-used.txt, which
// cmd/materializer's TestMonitoringKitMetricsExported checks against the
// daemon's registry.
//
// It is a module of its own so that the PromQL parser
// (github.com/prometheus/prometheus, whose module graph is large) stays out
// of the daemon's module graph and out of `make test`; `make
// test-monitoring` runs it, and CI does.
package monitoring
