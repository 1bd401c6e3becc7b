package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/failoverd/failoverd/configs"
)

// Simulated intervals: the group's configuration as written below.
const (
	pollInterval = time.Second
)

// secret is the replication password file every simulated group names
// (the daemon reads it when it repoints a replica).
var secret struct {
	once sync.Once
	dir  string
	err  error
}

// secretFile creates the password file once per process.
func secretFile() (string, error) {
	secret.once.Do(func() {
		secret.dir, secret.err = os.MkdirTemp("", "failoverd-sim-")
		if secret.err == nil {
			secret.err = os.WriteFile(filepath.Join(secret.dir, "password"), []byte("sim\n"), 0o600)
		}
		if secret.err == nil {
			secret.err = os.WriteFile(filepath.Join(secret.dir, "viewkey"), []byte("sim-view-signing-key-0123456789abcdef\n"), 0o600)
		}
	})
	return filepath.Join(secret.dir, "password"), secret.err
}

// removeSecret removes the password file (TestMain, after every history).
func removeSecret() {
	if secret.dir != "" {
		os.RemoveAll(secret.dir)
	}
}

// siteAddress is the address of the index-th site in the configuration;
// the model finds a repoint's source by it.
func siteAddress(index int) string { return fmt.Sprintf("127.0.0.1:%d", 13306+index) }

// sidecarAddress is the address of the index-th site's sidecar.
func sidecarAddress(index int) string { return fmt.Sprintf("127.0.0.1:%d", 19300+index) }

// groupConfig is the simulated group's configuration, written and loaded
// as a user's would be (defaults and validation included).
func groupConfig(su Setup) (*configs.Config, error) {
	pw, err := secretFile()
	if err != nil {
		return nil, fmt.Errorf("sim: password file: %w", err)
	}
	fencing := "confirmed"
	if su.SemiSyncFencing {
		fencing = "semisync"
	}
	key := ""
	if su.Sidecars {
		fencing = "sidecar"
		if su.SemiSyncFencing {
			fencing = "semisync+sidecar"
		}
		key = "\n  viewSigningKeyFile: " + filepath.Join(filepath.Dir(pw), "viewkey")
	}
	var b strings.Builder
	fmt.Fprintf(&b, `daemon:
  listen: 127.0.0.1:8080%s
  stateStore: {type: file, path: %s/state.json}
groups:
  - name: sim
    engine: mysql
    pollInterval: 1s
    probeTimeout: 800ms
    failureThreshold: %d
    recoveryThreshold: 2
    detection: corroborated
    fencing: %s
    failoverCooldown: %ds
    escalation: {maxFailovers: %d, window: 10m}
    relayDrainTimeout: 15s
    maxCandidateLag: 30s
    credentials:
      admin: {user: failoverd, passwordFile: %s}
      replication: {user: repl, passwordFile: %s}
    sites:
`, key, filepath.Dir(pw), su.FailureThreshold, fencing, su.CooldownSteps, su.EscalationCount, pw, pw)
	for i := range su.Sites {
		role := "primary-candidate"
		if i == su.DROnly {
			role = "dr-only"
		}
		sc := ""
		if su.Sidecars {
			sc = fmt.Sprintf(", sidecar: {address: %q}", sidecarAddress(i))
		}
		fmt.Fprintf(&b, "      - {name: s%d, role: %s, mysql: {address: %q}%s}\n", i, role, siteAddress(i), sc)
	}
	cfg, err := configs.Parse(b.String(), filepath.Dir(pw))
	if err != nil {
		return nil, fmt.Errorf("sim: configuration: %w\n%s", err, b.String())
	}
	return cfg, nil
}
