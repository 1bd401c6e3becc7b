//go:build tools

// Package tools pins the real components the e2e suite starts (kube-apiserver
// and etcd). It lives in its own module so the daemon's go.mod never carries
// Kubernetes server dependencies.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
