package mongodb

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// TestScanSubmissionsReturnsCallbackError: an error of the scan's
// callback (the rebuild's fold: a refused write, the write guard, a
// cancel) stops the scan and is returned as is. Swallowed, the scan would
// end early with no error: the rebuild would report success and save a
// checkpoint past the submissions it never folded.
func TestScanSubmissionsReturnsCallbackError(t *testing.T) {
	d, md, _ := mockDB(t)
	ts := bson.NewDateTimeFromTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sub := func(i byte, user string) bson.D {
		return bson.D{{Key: "_id", Value: bson.ObjectID{11: i}}, {Key: "user", Value: user}, {Key: "problem", Value: int32(1)},
			{Key: "languageType", Value: int32(1)}, {Key: "timestamp", Value: ts}, {Key: "status", Value: int32(0)}, {Key: "score", Value: int32(100)}}
	}
	md.AddResponses(cursorReply("normal-oj.submission", sub(1, "alice"), sub(2, "bob")))
	stop := errors.New("the fold's write was refused")
	var seen []string
	err := d.ScanSubmissions(context.Background(), func(s materialize.Submission) error {
		seen = append(seen, s.User)
		return stop
	}, func(e *materialize.DecodeError) { t.Errorf("malformed: %v", e) })
	if !errors.Is(err, stop) {
		t.Errorf("ScanSubmissions: %v, want the callback's error", err)
	}
	if len(seen) != 1 {
		t.Errorf("callback called for %v, want the first submission only", seen)
	}
}
