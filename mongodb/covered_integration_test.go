package mongodb

import (
	"math/rand/v2"
	"testing"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
)

// TestIntegrationCoveredNullsArePlain: on a real server, with the
// covering index (whose plan hands the pipeline null for a missing
// languageType, status or score), UserStats counts every Back-End-shaped
// submission on the server, reading none by _id, and its counts are
// memstore's (TestCoveredNullsArePlain holds the evaluator's reading).
func TestIntegrationCoveredNullsArePlain(t *testing.T) {
	base := testDB(t)
	ctx := testCtx(t)
	if err := base.EnsureIndexes(ctx, nil); err != nil {
		t.Fatal(err)
	}
	client, log := monitoredClient(t)
	db := newDB(client, Config{Database: base.db.Name()}.withDefaults())
	users := []string{"a", "b"}
	r := rand.New(rand.NewPCG(7, 29))
	st := memstore.New()
	for i := range 60 {
		raw := rawOf(backEndSubmission(r, i, users))
		if err := st.Load(materialize.CollSubmission, raw); err != nil {
			t.Fatal(err)
		}
		if _, err := db.submissions.InsertOne(ctx, raw); err != nil {
			t.Fatal(err)
		}
	}
	want, _, err := st.UserStats(ctx, users)
	if err != nil {
		t.Fatal(err)
	}
	finds := len(log.named("find"))
	got, _, err := db.UserStats(ctx, users)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(log.named("find")) - finds; n > 0 {
		t.Errorf("UserStats read %d submissions' finds by _id: a Back-End submission was not counted on the server", n)
	}
	for _, u := range users {
		if !got[u].Equal(want[u]) {
			t.Errorf("user %q: server %+v, memstore %+v", u, got[u], want[u])
		}
	}
}
