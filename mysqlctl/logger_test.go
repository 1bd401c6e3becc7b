package mysqlctl

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// The driver's messages go to their own key: a second "msg" key in one
// JSON line is read differently by every log tool.
func TestDriverLoggerKeepsMsgUnique(t *testing.T) {
	var buf bytes.Buffer
	driverLogger{slog.New(slog.NewJSONHandler(&buf, nil))}.Print("closing bad idle connection: ", "EOF")
	line := buf.String()
	if strings.Count(line, `"msg"`) != 1 || !strings.Contains(line, `"detail":"closing bad idle connection: EOF"`) {
		t.Fatalf("log line %s", line)
	}
}
