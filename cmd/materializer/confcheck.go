package main

import (
	"errors"
	"fmt"

	"github.com/normal-oj/noj-materializer/mongodb"
)

// checkDatabaseName refuses a MATERIALIZER_DATABASE MongoDB would refuse
// (mongodb.CheckDatabaseName).
func checkDatabaseName(name string) error {
	if err := mongodb.CheckDatabaseName(name); err != nil {
		return &configError{fmt.Sprintf("%s_DATABASE=%q: %v", envPrefix, name, err)}
	}
	return nil
}

// checkURIOptions refuses connection-string options the daemon cannot
// work with (mongodb.CheckURIOptions), naming the variables involved.
func checkURIOptions(uri string) error {
	err := mongodb.CheckURIOptions(uri)
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf("%s_MONGODB_URI: %v", envPrefix, err)
	if oe := (*mongodb.URIOptionError)(nil); errors.As(err, &oe) && oe.Option == "timeoutMS" {
		msg += fmt.Sprintf(" (the daemon's own deadline is %s_WRITE_TIMEOUT)", envPrefix)
	}
	return &configError{msg}
}
