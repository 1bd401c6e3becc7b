package configs

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Digest is the SHA-256 (hex) of the file Load read, or of the YAML Parse
// was given: status shows it, so an operator can tell which file a daemon
// runs ("" for a Config built in code).
func (c *Config) Digest() string { return c.digest }

// RestartChanges lists what next changes from running that a running daemon
// cannot take over: the whole daemon section (listen address, API token and
// TLS, view signing key, state store, leader election, advertise URL) and
// the clusters, which the store, the election and the open Kubernetes
// clients rest on. A reload applies groups only, so any of these refuses
// it. Each problem names the field and carries its position in next's file
// (or the section it belongs in); nil when nothing of the kind changed.
func RestartChanges(running, next *Config) []Problem {
	var out []Problem
	add := func(path string, was, now reflect.Value) {
		p := Problem{Path: path, Message: fmt.Sprintf("changed from %s to %s: this setting needs a restart "+
			"(a reload applies the groups only); put back %s or restart the daemon", show(was), show(now), show(was))}
		next.src.place(&p)
		out = append(out, p)
	}
	diffValues("daemon", reflect.ValueOf(running.Daemon), reflect.ValueOf(next.Daemon), add)
	diffValues("clusters", reflect.ValueOf(running.Clusters), reflect.ValueOf(next.Clusters), add)
	(&Problems{List: out}).sort()
	return out
}

// diffValues calls add for every field under path whose value differs
// between a and b: struct fields by their yaml names, list entries by index
// while both lists have the same length, anything else whole.
func diffValues(path string, a, b reflect.Value, add func(path string, was, now reflect.Value)) {
	switch {
	case a.Kind() == reflect.Struct && a.Type() != reflect.TypeFor[time.Duration]():
		for i := range a.NumField() {
			f := a.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			diffValues(join(path, name), a.Field(i), b.Field(i), add)
		}
	case a.Kind() == reflect.Slice && a.Len() == b.Len() && a.Type().Elem().Kind() == reflect.Struct:
		for i := range a.Len() {
			diffValues(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i), add)
		}
	case !reflect.DeepEqual(a.Interface(), b.Interface()):
		add(path, a, b)
	}
}

// show formats a configuration value for a message: strings quoted, lists
// of structs by their length.
func show(v reflect.Value) string {
	switch {
	case v.Kind() == reflect.String:
		return fmt.Sprintf("%q", v.String())
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
		return fmt.Sprintf("%d entries", v.Len())
	case v.Kind() == reflect.Slice && v.Len() == 0:
		return "[]"
	}
	return fmt.Sprint(v.Interface())
}
