package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// TestSeedCancelledAfterTheLastDocument: a cancel that arrives after the
// generator emitted its last document (no later check inside it) still
// stops seed: the dump directory or archive is not committed and the
// cancel is returned, as for a cancel in the middle (the command then
// exits as interrupted, saying the partial output was removed).
func TestSeedCancelledAfterTheLastDocument(t *testing.T) {
	write := map[string]func(ctx context.Context, target string, gen func(emit func(string, bson.Raw) error) error) error{
		"directory": seedDir,
		"archive": func(ctx context.Context, target string, gen func(emit func(string, bson.Raw) error) error) error {
			return seedArchive(ctx, target, "normal-oj", gen)
		},
	}
	for name, w := range write {
		t.Run(name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "seed")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			err := w(ctx, target, func(emit func(string, bson.Raw) error) error {
				if err := emit(materialize.CollUser, mtest.Raw("_id", "u")); err != nil {
					return err
				}
				cancel() // after the last document
				return nil
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v, want the cancel", name, err)
			}
			if _, serr := os.Stat(target); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("%s %s committed after a cancel (stat: %v)", name, target, serr)
			}
		})
	}
}
