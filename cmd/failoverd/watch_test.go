package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failoverd/failoverd/api"
)

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// status -w keeps watching across a daemon restart and a leader change:
// the daemon goes away (its listener and connections closed), comes back
// on the same address first answering 503 (a follower that knows no leader
// yet), then answers again; the watch says once that it is reconnecting,
// then that it reconnected, and goes on printing until interrupted (exit 0).
func TestStatusWatchReconnectsAcrossDaemonRestart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	apiHandler := api.Handler(api.Options{Control: statusOnly{}})
	var noLeader atomic.Bool
	var refused atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if noLeader.Load() {
			refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error": "no leader known"}`))
			return
		}
		apiHandler.ServeHTTP(w, r)
	})
	first := &http.Server{Handler: handler, ReadHeaderTimeout: time.Second}
	go func() { _ = first.Serve(ln) }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- executeContext(ctx, []string{"status", "-w", "--interval", "20ms", "--server", "http://" + addr}, &out, &errOut)
	}()
	prints := func() int { return strings.Count(out.String(), "DAEMON tls-daemon") }
	waitUntil(t, "two prints", func() bool { return prints() >= 2 })

	_ = first.Close() // the daemon stops
	waitUntil(t, "the reconnecting notice", func() bool { return strings.Contains(errOut.String(), "reconnecting every 20ms") })
	if !strings.Contains(errOut.String(), "daemon unreachable") {
		t.Errorf("the notice does not say why: %q", errOut.String())
	}

	ln2, err := net.Listen("tcp", addr) // the daemon restarts on its address
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	noLeader.Store(true)
	second := &http.Server{Handler: handler, ReadHeaderTimeout: time.Second}
	go func() { _ = second.Serve(ln2) }()
	t.Cleanup(func() { _ = second.Close() })
	waitUntil(t, "requests answered 503", func() bool { return refused.Load() >= 3 })
	select {
	case code := <-done:
		t.Fatalf("the watch ended (exit %d) on a 503: %q", code, errOut.String())
	default:
	}
	before := prints()
	noLeader.Store(false) // a leader is known again
	waitUntil(t, "prints after reconnecting", func() bool { return prints() >= before+2 })
	if !strings.Contains(errOut.String(), "reconnected to http://"+addr) || strings.Count(errOut.String(), "reconnecting") != 1 {
		t.Errorf("stderr: %q, want one reconnecting notice and one reconnected", errOut.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("interrupted watch: exit %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not end when interrupted")
	}
}

// Before its first print a watch ends at once on no answer (a wrong
// --server, exit 3); an answer that stays wrong (unknown group) ends it too.
func TestStatusWatchEndsOnPermanentErrors(t *testing.T) {
	if code, _, errOut := runCLI(t, "status", "-w", "--interval", "10ms", "--server", "http://127.0.0.1:1"); code != 3 || !strings.Contains(errOut, "unreachable") {
		t.Errorf("watch with no daemon: exit %d %q, want 3", code, errOut)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.Handler(api.Options{Control: statusOnly{}}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	if code, _, errOut := runCLI(t, "status", "nope", "-w", "--interval", "10ms", "--server", "http://"+ln.Addr().String()); code != 1 || !strings.Contains(errOut, "404") {
		t.Errorf("watch of an unknown group: exit %d %q, want 1", code, errOut)
	}
	if !transient(&api.HTTPError{Code: 502}) || transient(&api.HTTPError{Code: 401}) {
		t.Error("5xx answers are transient, 4xx are not")
	}
}
