package testenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// netns is a network namespace of its own, held by one OS thread of the
// test process: sockets made and processes started on that thread live in
// it, everything else stays in the process's namespace. Its 127.0.0.1 is
// not the machine's: a server started in it is reachable from outside
// only through a link, which a test can cut. Nothing leaves the machine
// and nothing outlives the test process: the namespace dies with its last
// thread, socket and process. Needs root (unshare(CLONE_NEWNET)); the
// `ip` command is not used. The thread may be the process's first, whose
// namespace /proc/self/ns/net shows: read /proc/thread-self from a locked
// thread for the machine's.
type netns struct {
	name string
	reqs chan func()
	once sync.Once
}

// errNoNetns marks a machine where a network namespace cannot be made
// (not root, or unshare refused by a sandbox).
var errNoNetns = errors.New("cannot make a network namespace")

// newNetns makes a network namespace with its loopback up.
func newNetns(name string) (*netns, error) {
	ns := &netns{name: name, reqs: make(chan func())}
	ready := make(chan error, 1)
	go func() {
		// Never unlocked: the thread is in another network namespace, and
		// Pdeathsig of a process started here fires when this thread
		// exits. Returning while locked makes the runtime end the thread
		// (close, once every process started here is gone).
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- fmt.Errorf("netns %s: unshare: %w: %w", name, errNoNetns, err)
			return
		}
		if err := loopbackUp(); err != nil {
			ready <- fmt.Errorf("netns %s: loopback up: %w", name, err)
			return
		}
		ready <- nil
		for f := range ns.reqs {
			f()
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return ns, nil
}

// loopbackUp sets IFF_UP on lo (a new namespace's lo is down, so
// 127.0.0.1 cannot be bound), by ioctl on the calling thread's namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS: %w", err)
	}
	return nil
}

// do runs f on the namespace's thread and waits for it.
func (ns *netns) do(f func()) {
	done := make(chan struct{})
	ns.reqs <- func() { f(); close(done) }
	<-done
}

// listen listens on addr inside the namespace.
func (ns *netns) listen(addr string) (l net.Listener, err error) {
	ns.do(func() { l, err = net.Listen("tcp", addr) })
	return l, err
}

// dial connects to addr inside the namespace (loopback: it answers or
// refuses at once; the timeout only bounds a full backlog).
func (ns *netns) dial(addr string) (c net.Conn, err error) {
	ns.do(func() { c, err = net.DialTimeout("tcp", addr, 2*time.Second) })
	return c, err
}

// close ends the namespace's thread; call it only once every process
// started in it is gone (their Pdeathsig fires with the thread).
func (ns *netns) close() { ns.once.Do(func() { close(ns.reqs) }) }

// link forwards every connection accepted on its listener to what dial
// connects to, byte for byte in both directions: the one way between a
// network namespace and the machine's (or another namespace's) loopback.
// Cut drops its connections and refuses new ones (accepted and closed at
// once: the peer sees a reset, as across a failed link) until Restore; the
// listener stays open so its port stays taken.
type link struct {
	name string
	l    net.Listener
	dial func() (net.Conn, error)

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newLink starts forwarding l's connections to dial.
func newLink(name string, l net.Listener, dial func() (net.Conn, error)) *link {
	k := &link{name: name, l: l, dial: dial, conns: map[net.Conn]struct{}{}}
	k.wg.Go(k.serve)
	return k
}

func (k *link) serve() {
	for {
		c, err := k.l.Accept()
		if err != nil {
			return // closed
		}
		k.wg.Go(func() { k.forward(c) })
	}
}

// track registers c as live; false (c closed) while cut.
func (k *link) track(c net.Conn) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cut || k.conns == nil {
		_ = c.Close()
		return false
	}
	k.conns[c] = struct{}{}
	return true
}

func (k *link) untrack(c net.Conn) {
	k.mu.Lock()
	delete(k.conns, c)
	k.mu.Unlock()
	_ = c.Close()
}

func (k *link) forward(c net.Conn) {
	if !k.track(c) {
		return
	}
	defer k.untrack(c)
	up, err := k.dial()
	if err != nil {
		return // the client sees the connection closed, as a refusal
	}
	if !k.track(up) {
		return
	}
	defer k.untrack(up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done // one side ended: end both (the deferred closes end the other copy)
}

// setCut cuts (true) or restores (false) the link; cutting closes every
// live connection.
func (k *link) setCut(cut bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cut = cut
	if cut {
		for c := range k.conns {
			_ = c.Close()
		}
	}
}

// close stops the link for good: listener and connections closed, its
// goroutines ended.
func (k *link) close() {
	_ = k.l.Close()
	k.mu.Lock()
	for c := range k.conns {
		_ = c.Close()
	}
	k.conns = nil
	k.mu.Unlock()
	k.wg.Wait()
}
