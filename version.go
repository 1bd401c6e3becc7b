// Package failoverd holds the release this source tree is. The VERSION file
// beside it is the one place the version is written: `failoverd version`,
// the container image's tag and labels, and the Helm chart's version and
// appVersion all follow it (release_test.go holds them to it).
package failoverd

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var versionFile string

// Version is the release, from the VERSION file (semantic versioning,
// without a leading "v"): every binary built from this tree reports it,
// however it was built (go build, go install, make, the Dockerfile).
var Version = strings.TrimSpace(versionFile)
