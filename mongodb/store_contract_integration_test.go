package mongodb

import (
	"testing"

	"github.com/normal-oj/noj-materializer/internal/storetest"
	"github.com/normal-oj/noj-materializer/materialize"
)

// TestIntegrationStoreContract runs the store suite (internal/storetest),
// the one memstore's unit tests run, on a real replica set: each test in
// a fresh database with the daemon's indexes (skipped without a server:
// MATERIALIZER_TEST_MONGODB_URI, or make test-integration with Docker).
func TestIntegrationStoreContract(t *testing.T) {
	serverURI(t)
	storetest.Run(t, func(t *testing.T, docs materialize.Docs) (storetest.Store, func() materialize.Docs) {
		db := testDB(t)
		if err := db.EnsureIndexes(testCtx(t), nil); err != nil {
			t.Fatal(err)
		}
		load(t, db, docs)
		return db, func() materialize.Docs { return readAll(t, db) }
	})
}
