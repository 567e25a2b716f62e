package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/normal-oj/noj-materializer/dump"
)

// floor is the physical floor of an offline verify (out empty) or rebuild:
// a plain reader of the same files that touches only the fields the
// derivation needs (submissions: _id, user, problem, timestamp,
// languageType, status, score; homeworks: duration.end, penalty and every
// studentStatus entry's fields; users: _id and the three derived fields;
// problems: _id and homeworks), and, for a rebuild, writes the output
// bytes (user and homework documents as read, every other file copied as
// the command copies it). Arrays the derivation walks (a problem's
// homeworks, a user's AC_problem_ids) are walked element by element.
// It derives nothing. It returns a checksum of what it touched, so the
// work cannot be optimized away.
func floor(dir, out string) (uint64, error) {
	var sum uint64
	touch := map[string]func([]byte){
		"submission": func(doc []byte) {
			eachElement(doc, func(key []byte, v bsoncore.Value) {
				switch string(key) {
				case "_id", "user", "problem", "timestamp", "languageType", "status", "score":
					sum += uint64(len(v.Data)) + uint64(v.Data[0])
				}
			})
		},
		"homework": func(doc []byte) {
			eachElement(doc, func(key []byte, v bsoncore.Value) {
				switch string(key) {
				case "duration", "penalty":
					sum += uint64(len(v.Data))
				case "studentStatus":
					eachElement(v.Data, func(user []byte, ud bsoncore.Value) {
						sum += uint64(len(user))
						eachElement(ud.Data, func(pk []byte, e bsoncore.Value) {
							eachElement(e.Data, func(k []byte, f bsoncore.Value) {
								sum += uint64(len(f.Data))
							})
						})
					})
				}
			})
		},
		"user": func(doc []byte) {
			eachElement(doc, func(key []byte, v bsoncore.Value) {
				switch string(key) {
				case "_id", "submission", "AC_submission":
					sum += uint64(len(v.Data))
				case "AC_problem_ids":
					eachElement(v.Data, func(_ []byte, p bsoncore.Value) { sum += uint64(p.Data[0]) })
				}
			})
		},
		"problem": func(doc []byte) {
			eachElement(doc, func(key []byte, v bsoncore.Value) {
				switch string(key) {
				case "_id":
					sum += uint64(len(v.Data))
				case "homeworks":
					eachElement(v.Data, func(_ []byte, h bsoncore.Value) { sum += uint64(h.Data[0]) })
				}
			})
		},
	}
	if out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return 0, err
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return 0, err
		}
		for _, e := range entries {
			name := e.Name()
			if name == "user.bson" || name == "homework.bson" || e.IsDir() {
				continue
			}
			if err := copyFile(filepath.Join(dir, name), filepath.Join(out, name)); err != nil {
				return 0, err
			}
		}
	}
	// The same reader as the offline commands (framing checked, documents
	// sliced out of large reads), so the ratio is the derivation's cost.
	d, err := dump.Resolve(dir, "")
	if err != nil {
		return 0, err
	}
	for _, coll := range []string{"problem", "homework", "user", "submission"} {
		var w *bufio.Writer
		if out != "" && (coll == "user" || coll == "homework") {
			f, err := os.Create(filepath.Join(out, coll+".bson"))
			if err != nil {
				return 0, err
			}
			defer f.Close()
			w = bufio.NewWriterSize(f, 1<<20)
		}
		if err := d.Each(coll, false, func(doc bson.Raw) error {
			touch[coll](doc)
			if w != nil {
				_, err := w.Write(doc)
				return err
			}
			return nil
		}); err != nil {
			return 0, err
		}
		if w != nil {
			if err := w.Flush(); err != nil {
				return 0, err
			}
		}
	}
	return sum, nil
}

// eachElement walks a document's top-level elements; key is valid only
// during the call.
func eachElement(doc []byte, fn func(key []byte, v bsoncore.Value)) {
	if len(doc) < 5 {
		return
	}
	rem := doc[4 : len(doc)-1]
	for len(rem) > 0 {
		el, next, ok := bsoncore.ReadElement(rem)
		if !ok {
			return
		}
		rem = next
		i := bytes.IndexByte(el[1:], 0)
		if i < 0 {
			return
		}
		val, _, ok := bsoncore.ReadValue(el[i+2:], bsoncore.Type(el[0]))
		if !ok || len(val.Data) == 0 {
			continue
		}
		fn(el[1:i+1], val)
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
