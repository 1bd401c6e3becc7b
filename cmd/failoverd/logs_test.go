package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// client-go's klog and go-redis lines come out as our JSON, each key once.
func TestLibraryLogsAreRoutedIntoSlog(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev); klog.ClearLogger() })
	routeLibraryLogs(slog.New(slog.NewJSONHandler(&buf, nil)))
	klog.InfoS("leader election lost", "lease", "failoverd")
	klog.Flush()
	redisLogger{slog.Default()}.Printf(context.Background(), "redis: %s", "connection pool timeout")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got %q", buf.String())
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		if strings.Count(l, `"msg"`) != 1 {
			t.Errorf("msg twice: %s", l)
		}
	}
	if !strings.Contains(lines[0], `"logger":"client-go"`) || !strings.Contains(lines[0], "leader election lost") {
		t.Errorf("klog line %s", lines[0])
	}
	if !strings.Contains(lines[1], `"detail":"redis: connection pool timeout"`) {
		t.Errorf("redis line %s", lines[1])
	}
}
