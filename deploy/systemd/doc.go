// Package systemd holds no code: its directory ships failoverd's systemd
// units (failoverd.service, failoverd-sidecar@.service, the MySQL drop-in and
// the sidecar's environment file), and its tests check them with
// systemd-analyze verify, against the flags of the built binary, and the
// Dockerfile's build command against the Makefile's.
package systemd
