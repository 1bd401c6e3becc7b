package daemon

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/test/testenv"
)

// The etcd leader's term ends — and with it every action, which derives
// from the term's context — when its election key is gone, when its session
// ends, and when the quorum stops answering for a third of the TTL: before
// the server could expire the session and elect another daemon.
func TestEtcdWatchdogEndsTheTerm(t *testing.T) {
	const ttl = 3 * time.Second
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, m *testenv.EtcdMember, s *concurrency.Session, tok store.Token)
	}{
		{"election key deleted", func(t *testing.T, m *testenv.EtcdMember, _ *concurrency.Session, tok store.Token) {
			if _, err := m.Client(t).Delete(context.Background(), tok.Key); err != nil {
				t.Fatal(err)
			}
		}},
		{"session ended", func(t *testing.T, _ *testenv.EtcdMember, s *concurrency.Session, _ store.Token) {
			_ = s.Close()
		}},
		{"quorum not answering", func(t *testing.T, m *testenv.EtcdMember, _ *concurrency.Session, _ store.Token) {
			if err := m.Pause(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Resume() })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testenv.StartEtcdCluster(t, 1)
			m := c.Members[0]
			cli := m.Client(t)
			sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ttl/time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			e := concurrency.NewElection(sess, "/t/leader")
			if err := e.Campaign(context.Background(), "me"); err != nil {
				t.Fatal(err)
			}
			tok := store.Token{Key: e.Key(), Rev: e.Rev()}
			d := &Daemon{etcd: cli, log: slog.New(slog.DiscardHandler), opts: Options{Identity: "me"}}
			term, resign := context.WithCancel(context.Background())
			defer resign()
			done := make(chan struct{})
			go func() { d.etcdWatchdog(term, resign, sess, tok, ttl); close(done) }()
			select {
			case <-term.Done():
				t.Fatal("the term ended while the leader was fine")
			case <-time.After(ttl / 2):
			}
			faulted := time.Now()
			tc.fault(t, m, sess, tok)
			select {
			case <-term.Done():
			case <-time.After(ttl):
				t.Fatalf("the term still runs %v after the fault: another daemon could lead by now", ttl)
			}
			t.Logf("term ended %v after the fault", time.Since(faulted))
			<-done
		})
	}
}
