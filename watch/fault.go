package watch

import (
	"errors"
	"fmt"
)

// Class is what kind of failure an error is. An error is classified once,
// where it is first understood (the database adapter for driver errors,
// the engine for its own), by wrapping it with WithClass; the fault policy
// then decides the response from the class and the phase alone.
type Class uint8

// Error classes.
const (
	// Unclassified: nothing marked the error.
	Unclassified Class = iota
	// Transient: a network error, a timeout, a primary step-down, a
	// retryable label: the same call succeeds later.
	Transient
	// Overloaded: the server asked the client to back off
	// (SystemOverloadedError, a killed or throttled operation).
	Overloaded
	// HistoryLost: the resume point is no longer in the oplog.
	HistoryLost
	// ResumeImpossible: the stream can never get past its checkpoint
	// although the history is there (an event over 16 MB, a refused token).
	ResumeImpossible
	// Refused: the server refused one write for good (a document past
	// 16 MB, a validator, a bad path): the same write fails every time.
	Refused
	// Unauthorized: the connected user lacks a privilege (13 Unauthorized).
	Unauthorized
	// NotPrimary: the deployment cannot take this command here (a
	// secondary reached with directConnection, a standalone, a wrong
	// topology) and no retry will find a primary.
	NotPrimary
	// Cancelled: the caller's context ended; not a failure.
	Cancelled
	// Fatal: no retry can help and the operator must act.
	Fatal
)

var classNames = [...]string{
	Unclassified: "unclassified", Transient: "transient", Overloaded: "overloaded",
	HistoryLost: "history_lost", ResumeImpossible: "resume_impossible", Refused: "refused",
	Unauthorized: "unauthorized", NotPrimary: "not_primary", Cancelled: "cancelled", Fatal: "fatal",
}

// String is the class's name as metrics and logs carry it.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", c)
}

// classError carries a class with the error it classifies.
type classError struct {
	class Class
	err   error
}

func (e *classError) Error() string { return e.err.Error() }
func (e *classError) Unwrap() error { return e.err }

// WithClass marks err as being of class c. The outermost mark of a chain
// wins, so a layer that knows better may reclassify. A nil err stays nil.
func WithClass(c Class, err error) error {
	if err == nil {
		return nil
	}
	return &classError{class: c, err: err}
}

// ClassOf returns the class err was marked with (the outermost mark); an
// error wrapping one of the older sentinels (ErrTransient, ErrHistoryLost,
// ErrResumeImpossible) has that sentinel's class; otherwise Unclassified.
func ClassOf(err error) Class {
	var ce *classError
	switch {
	case err == nil:
		return Unclassified
	case errors.As(err, &ce):
		return ce.class
	case errors.Is(err, ErrHistoryLost):
		return HistoryLost
	case errors.Is(err, ErrResumeImpossible):
		return ResumeImpossible
	case errors.Is(err, ErrTransient):
		return Transient
	}
	return Unclassified
}
