package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// prestartCase is a configuration directory: the YAML (ADDR0, ADDR1 and
// LISTEN replaced by free addresses) and its files with their modes.
type prestartCase struct {
	yaml  string
	files map[string]string
	modes map[string]os.FileMode // default 0600
}

const prestartYAML = `daemon:
  listen: LISTEN
  apiTokenFile: api.token
  viewSigningKeyFile: view.key
  stateStore: {path: state.json}
groups:
  - name: orders
    credentials:
      admin: {user: failoverd, passwordFile: admin.pw}
      replication: {user: repl, passwordFile: repl.pw}
    sites:
      - name: east
        mysql: {address: ADDR0}
      - name: west
        mysql: {address: ADDR1}
`

func goodPrestart() prestartCase {
	return prestartCase{yaml: prestartYAML, files: map[string]string{
		"api.token": "0123456789abcdef0123\n", "view.key": "0123456789abcdef0123456789abcdef\n", "admin.pw": "pw\n", "repl.pw": "pw\n",
	}, modes: map[string]os.FileMode{}}
}

// write writes the case into a new directory and returns the config file.
func (c prestartCase) write(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range c.files {
		mode, ok := c.modes[name]
		if !ok {
			mode = 0o600
		}
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	// Closed ports: a started daemon finds both sites down and does nothing.
	y := strings.NewReplacer("LISTEN", freeAddr(t), "ADDR0", freeAddr(t), "ADDR1", freeAddr(t)).Replace(c.yaml)
	f := filepath.Join(dir, "failoverd.yaml")
	if err := os.WriteFile(f, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestValidateAndRunRefuseAlike guards against validate saying "valid"
// where run refuses to start (the empty token file, empty password
// files, 3-byte token, 5-byte view key; two sites on one server; a
// kubeconfig that does not load): for each, validate exits 1 naming the
// key, run exits 1 before starting, and every problem line validate prints
// is in run's error, word for word (both call prestart).
func TestValidateAndRunRefuseAlike(t *testing.T) {
	cases := map[string]struct {
		edit func(*prestartCase)
		want string // a problem line validate must print (after the file name)
	}{
		"empty token file": {func(c *prestartCase) { c.files["api.token"] = "\n" }, "daemon.apiTokenFile: "},
		"3-byte token":     {func(c *prestartCase) { c.files["api.token"] = "abc" }, "daemon.apiTokenFile: "},
		"5-byte view key":  {func(c *prestartCase) { c.files["view.key"] = "abcde\n" }, "daemon.viewSigningKeyFile: "},
		"empty passwords": {func(c *prestartCase) { c.files["admin.pw"], c.files["repl.pw"] = "", "\n" },
			"groups[0].credentials.replication.passwordFile: "},
		"one server, two sites": {func(c *prestartCase) { c.yaml = strings.Replace(c.yaml, "ADDR1", "ADDR0", 1) },
			"groups[0].sites[1].mysql.address: "},
		"kubeconfig that does not load": {func(c *prestartCase) {
			c.yaml = strings.Replace(c.yaml, "groups:\n", "clusters: [{name: west, kubeconfig: west.kubeconfig}]\ngroups:\n", 1)
			c.files["west.kubeconfig"] = "apiVersion: v1\nkind: Config\n"
		}, "clusters[0].kubeconfig: "},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := goodPrestart()
			tc.edit(&c)
			f := c.write(t)
			code, _, vErr := runCLI(t, "validate", "-c", f)
			if code != 1 || !strings.Contains(vErr, f+":") || !strings.Contains(vErr, tc.want) {
				t.Fatalf("validate: exit %d, want 1 with %q; stderr:\n%s", code, tc.want, vErr)
			}
			code, rErr, started := runDaemon(t, f, nil)
			if started || code != 1 {
				t.Fatalf("run: exit %d (started %v), want 1 before starting; stderr:\n%s", code, started, rErr)
			}
			for _, line := range strings.Split(vErr, "\n") {
				if strings.HasPrefix(line, f+":") && !strings.Contains(rErr, "\n  "+line) {
					t.Errorf("validate's problem\n  %s\nis not in run's error:\n%s", line, rErr)
				}
			}
		})
	}
}

// TestRunStartsWhatValidateAccepts is the other half of
// TestValidateAndRunRefuseAlike: a configuration validate accepts, with a
// warning (a world-readable token file), starts under run, which logs the
// same warning; SIGTERM stops it.
func TestRunStartsWhatValidateAccepts(t *testing.T) {
	c := goodPrestart()
	c.modes["api.token"] = 0o644
	f := c.write(t)
	code, out, vErr := runCLI(t, "validate", "-c", f)
	warning := "daemon.apiTokenFile: " + filepath.Join(filepath.Dir(f), "api.token") + " is readable by every user of this host (mode 0644)"
	if code != 0 || !strings.Contains(out, f+": valid") || !strings.Contains(out, "warning: "+f+":") || !strings.Contains(out, warning) {
		t.Fatalf("validate: exit %d, stdout:\n%s\nstderr:\n%s", code, out, vErr)
	}
	var logs string
	code, rErr, started := runDaemon(t, f, func(stderr string) { logs = stderr })
	if !started || code != 0 {
		t.Fatalf("run: exit %d (started %v), want a start, and 0 after SIGTERM; stderr:\n%s", code, started, rErr)
	}
	if !strings.Contains(logs, "msg=config.warning") || !strings.Contains(logs, warning) {
		t.Errorf("run does not log validate's warning %q:\n%s", warning, logs)
	}
}

// runDaemon runs `failoverd run -c f` until it exits, or until it logs
// daemon.started: then it calls onStart with the logs so far and stops it
// with SIGTERM. It returns the exit code, the logs and whether it started.
func runDaemon(t *testing.T, f string, onStart func(stderr string)) (code int, stderr string, started bool) {
	t.Helper()
	var stdout, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- execute([]string{"run", "-c", f, "--log-format", "text"}, &stdout, &errb) }()
	deadline := time.Now().Add(30 * time.Second) // safety net, not a timing assertion
	for !strings.Contains(errb.String(), "msg=daemon.started") {
		select {
		case code := <-done:
			return code, errb.String(), false
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("run neither started nor exited:\n%s", errb.String())
		}
	}
	if onStart != nil {
		onStart(errb.String())
	}
	// run catches SIGTERM from before it starts (signal.NotifyContext).
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop on SIGTERM")
	}
	return code, errb.String(), true
}

// TestValidateWarnsOfPlainHTTPToTheNetwork: the API on a non-loopback
// address without daemon.tls is a warning; validate still exits 0.
func TestValidateWarnsOfPlainHTTPToTheNetwork(t *testing.T) {
	c := goodPrestart()
	c.yaml = strings.Replace(c.yaml, "listen: LISTEN", "listen: 0.0.0.0:8080", 1)
	f := c.write(t)
	code, out, errOut := runCLI(t, "validate", "-c", f)
	if code != 0 || !strings.Contains(out, "warning: "+f+":2:3: daemon.listen: \"0.0.0.0:8080\" serves the API to other hosts over plain HTTP") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
