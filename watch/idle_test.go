package watch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// hang bounds a wait on a condition in real time. It only stops a test
// that would otherwise hang: a passing test returns as soon as its
// condition holds, so a loaded machine only makes it slower.
const hang = time.Minute

// idleFeed is a memstore feed that tells when the engine has consumed
// the whole oplog: the engine pauses (Engine.Sleep, Config.IdlePause)
// only after a poll found no event, either with no batch left to process
// (everything read is processed and its save decided) or holding a batch
// of possible echoes that waits for the clock or the next event. Either
// way the engine does nothing more until the oplog grows or its clock
// moves: the moment a test may assert that something did not happen.
// (A run that meets a fault also sleeps for its backoff: not for those.)
type idleFeed struct {
	st *memstore.Store

	mu     sync.Mutex
	polled int // the stream's position at its last poll that found no event
	idle   int // polled as of the engine's last pause; -1 before any
}

func newIdleFeed(st *memstore.Store) *idleFeed { return &idleFeed{st: st, idle: -1} }

func (f *idleFeed) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	s, err := f.st.Open(ctx, at)
	if err != nil {
		return nil, err
	}
	return &idleStream{Stream: s, f: f}, nil
}

// sleep is the engine's Sleep: it records the pause and yields briefly
// (the engine's clock is fake; real time only lets other goroutines run).
func (f *idleFeed) sleep(ctx context.Context, d time.Duration) {
	f.mu.Lock()
	f.idle = f.polled
	f.mu.Unlock()
	time.Sleep(50 * time.Microsecond)
}

// waitIdle waits until the engine paused after a poll at the oplog's
// current end. The caller must not write meanwhile.
func (f *idleFeed) waitIdle(t *testing.T, what string) {
	t.Helper()
	eventually(t, what, f.idleAtEnd)
}

// idleAtEnd reports whether the engine paused after a poll at the
// oplog's current end.
func (f *idleFeed) idleAtEnd() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.idle == f.st.OplogLen()
}

type idleStream struct {
	watch.Stream
	f *idleFeed
}

func (s *idleStream) Next(ctx context.Context) (watch.Event, bool, error) {
	ev, ok, err := s.Stream.Next(ctx)
	if !ok && err == nil {
		s.f.mu.Lock()
		s.f.polled = memstore.CheckpointPosition(resume.Checkpoint{Token: s.Stream.ResumeToken()})
		s.f.mu.Unlock()
	}
	return ev, ok, err
}
