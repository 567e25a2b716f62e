package watch

import (
	"context"

	"github.com/normal-oj/noj-materializer/materialize"
)

// HomeworkGuess is the engine's guess of the problems' homeworks, for the
// external tests of derive.
type HomeworkGuess = homeworkGuess

// RecomputeGuessing is Recompute with the engine's guess g, as
// ProcessBatch runs it.
func RecomputeGuessing(ctx context.Context, src Source, kidx KeyIndex, d *materialize.Deriver, keys *materialize.Keys, g *HomeworkGuess) (*Outcome, error) {
	return recompute(ctx, src, kidx, d, keys, nil, g)
}
