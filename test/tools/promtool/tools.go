//go:build tools

// Package promtool pins promtool, which checks and unit-tests the alert rules
// in deploy/prometheus. It lives in its own module so Prometheus's
// dependencies never meet k8s.io/kubernetes in test/tools/go.mod nor the
// daemon's go.mod.
package promtool

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
