package dump

import (
	"fmt"
	"slices"
	"strings"
)

// Open resolves the dump directory path (Resolve) for database db and
// checks that it holds all four source collections (Dir.CheckComplete)
// and only regular files with readable metadata (Dir.CheckFiles): what
// every command reading a dump directory needs. Errors are those of
// Resolve, an *IncompleteError, or CheckFiles'.
func Open(path, db string) (Dir, error) {
	d, err := Resolve(path, db)
	if err != nil {
		return d, err
	}
	if err := d.CheckComplete(); err != nil {
		return d, err
	}
	return d, d.CheckFiles()
}

// IncompleteError says a dump or an archive lacks one of the four source
// collections: a missing one would read as empty and verify as clean.
type IncompleteError struct {
	What    string   // "dump <path>" or "archive <name>"
	Missing []string // as the dump names them (user.bson, or normal-oj.user in an archive)
	Want    []string // all that must be there, named alike
	// NoneFound: none of the database's collections is there (the archive
	// holds another database's dump, or several); Databases are the
	// databases it holds.
	NoneFound bool
	Databases []string
}

func (e *IncompleteError) Error() string {
	msg := fmt.Sprintf("%s has no %s: a dump must hold all of %s (a missing one would verify as empty)",
		e.What, strings.Join(e.Missing, ", "), strings.Join(e.Want, ", "))
	if e.NoneFound {
		msg += "; its databases are " + strings.Join(e.Databases, ", ")
	}
	return msg
}

// CheckComplete refuses a dump directory missing one of the four source
// collections with an *IncompleteError.
func (d Dir) CheckComplete() error {
	if missing := d.Missing(); len(missing) > 0 {
		return &IncompleteError{What: "dump " + d.Path, Missing: dotBSON(missing), Want: dotBSON(Sources)}
	}
	return nil
}

// CheckComplete refuses, with an *IncompleteError, an archive (named
// name) whose namespaces colls miss one of the four source collections of
// database.
func CheckComplete(name string, colls []Namespace, database string) error {
	have := map[string]bool{}
	var dbs []string
	for _, ns := range colls {
		if ns.DB == database {
			have[ns.Collection] = true
		}
		if ns.DB != "" && !slices.Contains(dbs, ns.DB) {
			dbs = append(dbs, ns.DB)
		}
	}
	var missing []string
	for _, c := range Sources {
		if !have[c] {
			missing = append(missing, database+"."+c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	e := &IncompleteError{What: "archive " + name, Missing: missing, Want: Sources}
	if len(have) == 0 {
		e.NoneFound, e.Databases = true, dbs
	}
	return e
}

func dotBSON(colls []string) []string {
	out := make([]string, len(colls))
	for i, c := range colls {
		out[i] = c + ".bson"
	}
	return out
}
