package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestReadyz: /readyz, served by the daemon's mux, in each state of an
// instance: connecting, lost MongoDB, standby, holder without a stream,
// holder lagging, holder caught up.
func TestReadyz(t *testing.T) {
	const maxLag = 60 * time.Second
	tests := []struct {
		name      string
		connected bool    // openMongo returned
		up        float64 // materializer_mongodb_up
		held      float64 // materializer_lease_held
		open      float64 // materializer_stream_open
		lag       float64 // materializer_lag_seconds
		code      int
		body      string
	}{
		{"connecting", false, 0, 0, 0, 0, 503, "connecting to MongoDB"},
		// A standby that cannot reach MongoDB must not look like a healthy standby.
		{"standby, MongoDB lost", true, 0, 0, 0, 0, 503, "not connected to MongoDB"},
		{"holder, MongoDB lost", true, 0, 1, 1, 0, 503, "not connected to MongoDB"},
		{"standby", true, 1, 0, 0, 0, 200, "standby"},
		{"holder rebuilding or reopening", true, 1, 1, 0, 0, 503, "active, change stream not open"},
		{"holder lagging", true, 1, 1, 1, 61, 503, "active, lag 61.0s exceeds 1m0s"},
		{"holder at the bound", true, 1, 1, 1, 60, 200, "active, streaming, lag 60.0s"},
		{"holder caught up", true, 1, 1, 1, 0, 200, "active, streaming, lag 0.0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, m := newRegistry()
			rd := &readiness{metrics: m, maxLag: maxLag}
			rd.connected.Store(tc.connected)
			m.MongoDBUp.Set(tc.up)
			m.LeaseHeld.Set(tc.held)
			m.StreamOpen.Set(tc.open)
			m.LagSeconds.Set(tc.lag)
			srv := httptest.NewServer(newMux(reg, rd))
			defer srv.Close()

			resp, err := http.Get(srv.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.code || !strings.HasPrefix(string(body), tc.body) {
				t.Errorf("GET /readyz = %d %q, want %d %q...", resp.StatusCode, body, tc.code, tc.body)
			}
		})
	}
}
