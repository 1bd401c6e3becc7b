//go:build tools

// Package helm pins the helm CLI, which lints and renders the chart in
// deploy/helm/failoverd (the tests in deploy/kubernetes run it). It lives in
// its own module so Helm's dependencies never meet k8s.io/kubernetes in
// test/tools/go.mod nor the daemon's go.mod.
package helm

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
