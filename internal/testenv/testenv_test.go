package testenv

import (
	"testing"
)

func TestMongoImage(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"", DefaultMongoImage},
		{"mongo:4.4", "mongo:4.4"},
	} {
		t.Setenv("MATERIALIZER_TEST_MONGODB_IMAGE", tc.env)
		if got := MongoImage(); got != tc.want {
			t.Errorf("MATERIALIZER_TEST_MONGODB_IMAGE=%q: MongoImage() = %q, want %q", tc.env, got, tc.want)
		}
	}
}

// recorder is a testing.TB that records whether the code under test
// skipped or failed, without ending this test.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Skip(...any)           { r.skipped = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

func TestNoServer(t *testing.T) {
	for _, tc := range []struct {
		require    string
		skip, fail bool
	}{
		{"", true, false},
		{"0", true, false},
		{"1", false, true},
	} {
		t.Setenv("MATERIALIZER_TEST_REQUIRE_MONGODB", tc.require)
		r := &recorder{TB: t}
		NoServer(r, "no server")
		if r.skipped != tc.skip || r.failed != tc.fail {
			t.Errorf("MATERIALIZER_TEST_REQUIRE_MONGODB=%q: skipped %v failed %v, want %v %v", tc.require, r.skipped, r.failed, tc.skip, tc.fail)
		}
	}
}
