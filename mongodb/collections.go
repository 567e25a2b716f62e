package mongodb

import (
	"fmt"
	"strings"
)

// backEndCollections are the collections Back-End's mongoengine documents
// live in (Normal-OJ/Back-End mongo/engine.py at dfbd76a: User, Homework,
// Course, Number, Problem, Submission, Message, Announcement, PostThread,
// Post, Config with its subclass SubmissionConfig, LoginRecords; the
// collection is the class name in snake case), plus GridFS's fs.files and
// fs.chunks of its FileField/ZipField (submission code, test cases).
// The daemon's own collections must be none of them: it upserts its lease
// and checkpoint, and bulk-writes its key index, into them.
var backEndCollections = []string{
	"user", "homework", "course", "number", "problem", "submission", "message",
	"announcement", "post_thread", "post", "config", "login_records", "fs.files", "fs.chunks",
}

// CollectionError is an own collection (Config.CheckpointCollection or
// Config.KeysCollection) CheckCollections refuses.
type CollectionError struct {
	Keys   bool   // the key index's collection, not the checkpoint's
	Same   bool   // both name the same collection
	Name   string // the collection named
	Reason string
}

func (e *CollectionError) Error() string { return e.Reason }

// CheckCollections refuses a checkpoint or key-index collection that is
// empty, reserved (system.*), one of Back-End's collections (compared
// without case, to refuse near-misses like "User" too) or the same as the
// other one, with a *CollectionError.
func CheckCollections(checkpoint, keys string) error {
	for _, v := range []struct {
		keys       bool
		value, def string
	}{
		{false, checkpoint, DefaultCheckpointCollection},
		{true, keys, DefaultKeysCollection},
	} {
		refuse := func(reason string) error { return &CollectionError{Keys: v.keys, Name: v.value, Reason: reason} }
		switch {
		case v.value == "":
			return refuse("must not be empty")
		case strings.HasPrefix(v.value, "system."):
			return refuse("system.* collections are reserved by MongoDB")
		}
		for _, b := range backEndCollections {
			if strings.EqualFold(v.value, b) {
				return refuse(fmt.Sprintf("names Back-End's collection %q: the daemon would write its own documents there; choose a collection of its own (default %s)", b, v.def))
			}
		}
	}
	if strings.EqualFold(checkpoint, keys) {
		return &CollectionError{Keys: true, Same: true, Name: keys, Reason: fmt.Sprintf("the checkpoint and key-index collections must differ, both are %q", checkpoint)}
	}
	return nil
}
