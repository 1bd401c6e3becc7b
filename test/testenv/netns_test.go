package testenv

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// A member of an isolated Group Replication group lives in a network
// namespace of its own: its loopback is not the machine's (a port
// listening inside is refused outside), a process started there is in it,
// and the only way in is a link, whose Cut drops the live connection and
// refuses new ones until Restore. This is what CutOff rests on: without
// it a "cut" member would still reach the others directly.
func TestNetnsIsSeparateAndLinkCutsAndRestores(t *testing.T) {
	ns, err := newNetns("test")
	if errors.Is(err, errNoNetns) && os.Geteuid() != 0 {
		t.Skipf("SKIP: not root: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.close)

	inside, err := ns.listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inside.Close()
	go echo(inside)
	addr := inside.Addr().String()
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s listens in the namespace, yet the machine's loopback reached it", addr)
	}

	cmd := exec.Command("sleep", "30")
	if err := startCmd(cmd, ns); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// This thread's namespace, the machine's (/proc/self is the thread
	// group leader, which may be the namespace's thread).
	runtime.LockOSThread()
	self, _ := os.Readlink("/proc/thread-self/ns/net")
	runtime.UnlockOSThread()
	child, err := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/net")
	if err != nil || child == self || child == "" {
		t.Fatalf("child's network namespace %q (%v), the test's %q: want another", child, err, self)
	}

	outside, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := newLink("test", outside, func() (net.Conn, error) { return ns.dial(addr) })
	defer k.close()
	c := roundTrip(t, outside.Addr().String(), "through the link")
	k.setCut(true)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a live connection survived Cut")
	}
	c.Close()
	n, err := net.DialTimeout("tcp", outside.Addr().String(), time.Second)
	if err != nil {
		t.Fatalf("the link's listener closed on Cut (its port must stay taken): %v", err)
	}
	_ = n.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := n.Write([]byte("x\n")); err == nil {
		if _, err := n.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a new connection was served while cut (read: %v)", err)
		}
	}
	n.Close()
	k.setCut(false)
	roundTrip(t, outside.Addr().String(), "after Restore").Close()
}

// roundTrip dials addr, sends a line and wants it echoed; it returns the
// open connection.
func roundTrip(t *testing.T, addr, what string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatalf("%s: write: %v", what, err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("%s: echo %q, %v", what, line, err)
	}
	_ = c.SetDeadline(time.Time{})
	return c
}

// echo serves l, echoing every connection, until l closes.
func echo(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() { _, _ = io.Copy(c, c); c.Close() }()
	}
}
