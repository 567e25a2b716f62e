package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestConfigBounds: each bounded setting is accepted at its bound and
// refused just past it, with a configuration error naming the variable;
// the other settings are valid, so a refusal is the bound's own (a
// 500ms lease is also refused by the write timeout's check against the
// default timeout, which would hide a lost lease bound).
func TestConfigBounds(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string // the variable a refusal names; "" accepted
	}{
		{"lease ttl of 1s", map[string]string{"MATERIALIZER_LEASE_TTL": "1s", "MATERIALIZER_WRITE_TIMEOUT": "100ms"}, ""},
		{"lease ttl under 1s", map[string]string{"MATERIALIZER_LEASE_TTL": "900ms", "MATERIALIZER_WRITE_TIMEOUT": "100ms"}, "MATERIALIZER_LEASE_TTL"},
		{"pending age off", map[string]string{"MATERIALIZER_PENDING_AGE": "0"}, ""},
		{"pending age of 5m", map[string]string{"MATERIALIZER_PENDING_AGE": "5m"}, ""},
		{"pending age under 5m", map[string]string{"MATERIALIZER_PENDING_AGE": "4m59s"}, "MATERIALIZER_PENDING_AGE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cleanConfigEnv(t)
			t.Setenv("MATERIALIZER_MONGODB_URI", "mongodb://127.0.0.1:1/?replicaSet=rs0")
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			_, err := loadConfig(true)
			var ce *configError
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && !errors.As(err, &ce):
				t.Errorf("loadConfig: %v, want a configuration error naming %s", err, c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Errorf("%q does not name %s", err, c.want)
			}
		})
	}
	if err := checkPendingAge("--older-than", 5*time.Minute, "MATERIALIZER_PENDING_AGE, or 30m when that is 0"); err != nil {
		t.Errorf("--older-than 5m refused: %v", err)
	}
}
