package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/failoverd/failoverd/test/testenv"
)

var etcdPrefixes atomic.Int64

// etcdPrefix returns a key prefix no other test uses.
func etcdPrefix() string { return fmt.Sprintf("/failoverd-test/%d", etcdPrefixes.Add(1)) }

// campaign wins the election under prefix with a new session (TTL 30 s,
// closed at cleanup) and returns the election and its token.
func campaign(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix, who string) (*concurrency.Session, *concurrency.Election, Token) {
	t.Helper()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(30), concurrency.WithContext(ctx))
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	e := concurrency.NewElection(s, prefix+"/election")
	if err := e.Campaign(ctx, who); err != nil {
		t.Fatalf("campaign %s: %v", who, err)
	}
	return s, e, Token{Key: e.Key(), Rev: e.Rev()}
}

// leading returns a store under a fresh prefix whose token is a won election.
func leading(ctx context.Context, t *testing.T, cli *clientv3.Client) (*Etcd, string) {
	t.Helper()
	prefix := etcdPrefix()
	_, _, tok := campaign(ctx, t, cli, prefix, "a")
	s := NewEtcd(cli, prefix, fixedNow)
	s.SetToken(tok)
	return s, prefix
}

// richSample is sample with every optional part filled, so a round trip
// shows nothing is dropped.
func richSample(group string, epoch uint64) GroupState {
	st := sample(group, epoch)
	st.Halted, st.HaltedReason = true, "escalation limit"
	st.OperatorFenced = []string{"south"}
	st.LastFailover.Proof = "operator-confirmed"
	st.LastFailover.FenceConfirmation = &FenceConfirmation{Site: "west", Epoch: epoch - 1, At: t0, By: "alice"}
	st.InFlight.FenceConfirmation = &FenceConfirmation{Site: "east", Epoch: epoch, At: t0, By: "bob"}
	st.InFlight.PromotionGTID, st.InFlight.PublishedEpoch, st.InFlight.PublishedTo = "0-1-50", epoch, "west"
	st.Audit = []AuditEntry{
		{At: t0, Action: AuditConfirmFence, Site: "east", By: "bob", Result: AuditAccepted},
		{At: t0, Action: AuditSwitchover, Site: "north", By: "carol", Result: "refused: not a site"},
	}
	return st
}

func TestEtcdStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := testenv.StartEtcdCluster(t, 1)
	cli := c.Client(t)

	t.Run("round trip", func(t *testing.T) {
		s, prefix := leading(ctx, t, cli)
		if got := mustLoad(ctx, t, s, "orders"); got.Exists || got.Group != "orders" {
			t.Fatalf("never saved: %+v, want empty and not existing", got)
		}
		st := richSample("orders", 7)
		if err := s.Save(ctx, st); err != nil {
			t.Fatal(err)
		}
		want := st
		want.Exists, want.UpdatedAt = true, t0
		// A follower (no token) reads what the leader wrote.
		follower := NewEtcd(cli, prefix, func() time.Time { return t0.Add(time.Hour) })
		for name, from := range map[string]*Etcd{"leader": s, "follower": follower} {
			if got := mustLoad(ctx, t, from, "orders"); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s loads\n%+v\nwant\n%+v", name, got, want)
			}
		}
		if d, wantD := s.Describe(), "etcd "+prefix+" at "+c.Members[0].ClientURL(); d != wantD {
			t.Fatalf("Describe = %q, want %q", d, wantD)
		}
		// One key per group, under prefix/groups/.
		resp, err := cli.Get(ctx, prefix+"/groups/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Key) != prefix+"/groups/orders" {
			t.Fatalf("keys under %s/groups/: %v, %v", prefix, resp, err)
		}
	})

	t.Run("schema", func(t *testing.T) {
		s, prefix := leading(ctx, t, cli)
		put := func(raw string) {
			t.Helper()
			if _, err := cli.Put(ctx, prefix+"/groups/orders", raw); err != nil {
				t.Fatal(err)
			}
		}
		put(`{"version":1,"state":{"group":"orders","epoch":3,"activeSite":"east","updatedAt":"2026-01-01T00:00:00Z"}}`)
		if got := mustLoad(ctx, t, s, "orders"); got.Epoch != 3 || !got.Exists {
			t.Fatalf("version 1 document: %+v", got)
		}
		for _, tc := range []struct {
			name, raw string
			want      error
		}{
			{"newer schema", `{"version":99,"state":{"group":"orders","epoch":3}}`, ErrNewerSchema},
			{"not JSON", `{"version":`, ErrCorrupt},
			{"unknown field", `{"version":2,"state":{"group":"orders","epoch":3,"bogus":1}}`, ErrCorrupt},
			{"other group", `{"version":2,"state":{"group":"payments","epoch":3}}`, ErrCorrupt},
			{"no version", `{"state":{"group":"orders","epoch":3}}`, ErrCorrupt},
		} {
			put(tc.raw)
			if _, err := s.Load(ctx, "orders"); !errors.Is(err, tc.want) {
				t.Fatalf("%s: Load: %v, want %v", tc.name, err, tc.want)
			}
			// Nothing is saved over a state that could not be read.
			if err := s.Save(ctx, sample("orders", 100)); !errors.Is(err, tc.want) {
				t.Fatalf("%s: Save: %v, want %v", tc.name, err, tc.want)
			}
			resp, err := cli.Get(ctx, prefix+"/groups/orders")
			if err != nil || string(resp.Kvs[0].Value) != tc.raw {
				t.Fatalf("%s: stored %v (%v), want it untouched", tc.name, resp, err)
			}
		}
	})

	t.Run("write rules", func(t *testing.T) {
		for _, tc := range writeRules() {
			t.Run(tc.name, func(t *testing.T) {
				s, prefix := leading(ctx, t, cli)
				checkWriteRule(ctx, t, s, NewEtcd(cli, prefix, fixedNow), tc)
			})
		}
	})

	t.Run("caller changes do not reach the store", func(t *testing.T) {
		s, _ := leading(ctx, t, cli)
		st := withInFlight("orders", 5, "f1", "fence")
		if err := s.Save(ctx, st); err != nil {
			t.Fatal(err)
		}
		st.InFlight.ID = "f2"
		mustLoad(ctx, t, s, "orders").InFlight.ID = "f2"
		if err := s.Save(ctx, withInFlight("orders", 5, "f2", "fence")); !errors.Is(err, ErrInFlightMismatch) {
			t.Fatalf("Save of another action: %v, want ErrInFlightMismatch", err)
		}
	})

	t.Run("conflict after another writer", func(t *testing.T) {
		a, prefix := leading(ctx, t, cli)
		// b is a second store of the same leader (same token): only the
		// compare-and-swap on the key tells the two apart.
		b := NewEtcd(cli, prefix, fixedNow)
		b.SetToken(a.currentToken())
		if err := a.Save(ctx, sample("orders", 1)); err != nil {
			t.Fatal(err)
		}
		if got := mustLoad(ctx, t, b, "orders"); got.Epoch != 1 { // b's base: epoch 1
			t.Fatalf("b loads epoch %d", got.Epoch)
		}
		if err := a.Save(ctx, sample("orders", 2)); err != nil {
			t.Fatal(err)
		}
		err := b.Save(ctx, sample("orders", 3))
		if !errors.Is(err, ErrConflict) || errors.Is(err, ErrNotLeader) {
			t.Fatalf("stale writer: %v, want ErrConflict", err)
		}
		if !strings.Contains(err.Error(), "now stored: epoch 2") {
			t.Fatalf("conflict does not name what is stored: %v", err)
		}
		// Refused again without a Load: the refusal does not move the base.
		if err := b.Save(ctx, sample("orders", 3)); !errors.Is(err, ErrConflict) {
			t.Fatalf("second save without a load: %v, want ErrConflict", err)
		}
		if got := mustLoad(ctx, t, NewEtcd(cli, prefix, fixedNow), "orders"); got.Epoch != 2 {
			t.Fatalf("stored epoch %d after refused saves, want 2", got.Epoch)
		}
		if got := mustLoad(ctx, t, b, "orders"); got.Epoch != 2 {
			t.Fatalf("reload: epoch %d", got.Epoch)
		}
		if err := b.Save(ctx, sample("orders", 3)); err != nil {
			t.Fatalf("save after reload: %v", err)
		}
		// A key written by someone else before this store ever loaded it:
		// the first Save is based on what is stored then.
		c := NewEtcd(cli, prefix, fixedNow)
		c.SetToken(a.currentToken())
		if err := c.Save(ctx, sample("orders", 2)); !errors.Is(err, ErrEpochRegression) {
			t.Fatalf("unloaded save below the stored epoch: %v, want ErrEpochRegression", err)
		}
		if err := c.Save(ctx, sample("orders", 4)); err != nil {
			t.Fatal(err)
		}
		// Another group is another key: writing it does not conflict.
		if err := a.Save(ctx, sample("payments", 1)); err != nil {
			t.Fatal(err)
		}
		if err := c.Save(ctx, sample("orders", 5)); err != nil {
			t.Fatalf("save after another group's write: %v", err)
		}
	})

	t.Run("save without token", func(t *testing.T) {
		prefix := etcdPrefix()
		s := NewEtcd(cli, prefix, fixedNow)
		if err := s.Save(ctx, sample("orders", 1)); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("Save without token: %v, want ErrNotLeader", err)
		}
		_, _, tok := campaign(ctx, t, cli, prefix, "a")
		s.SetToken(tok)
		if err := s.Save(ctx, sample("orders", 1)); err != nil {
			t.Fatal(err)
		}
		s.SetToken(Token{}) // stepped down
		if err := s.Save(ctx, sample("orders", 2)); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("Save after SetToken(Token{}): %v, want ErrNotLeader", err)
		}
		// Without a token Load is a plain read: followers may look.
		if got := mustLoad(ctx, t, s, "orders"); got.Epoch != 1 {
			t.Fatalf("stored epoch %d, want 1", got.Epoch)
		}
	})

	t.Run("history", func(t *testing.T) {
		s, _ := leading(ctx, t, cli)
		if h, err := s.History(ctx, "orders"); err != nil || len(h) != 0 {
			t.Fatalf("history of a group never saved: %v, %v", h, err)
		}
		writes := []GroupState{withInFlight("orders", 1, "", ""), withInFlight("orders", 2, "f1", "fence"), withInFlight("orders", 2, "f1", "promote"), withInFlight("orders", 3, "", "")}
		for i, st := range writes {
			if err := s.Save(ctx, st); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
			if i == 1 { // another group's write in between is not in this group's history
				if err := s.Save(ctx, sample("payments", 9)); err != nil {
					t.Fatal(err)
				}
			}
		}
		h, err := s.History(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != len(writes) {
			t.Fatalf("history has %d revisions, want %d: %+v", len(h), len(writes), h)
		}
		for i, r := range h {
			w := writes[i]
			if r.State.Epoch != w.Epoch || (r.State.InFlight == nil) != (w.InFlight == nil) ||
				(w.InFlight != nil && r.State.InFlight.Step != w.InFlight.Step) || !r.State.Exists {
				t.Fatalf("revision %d: %+v, want %+v", i, r.State, w)
			}
			if i > 0 && r.ModRevision <= h[i-1].ModRevision {
				t.Fatalf("revisions out of order: %d after %d", r.ModRevision, h[i-1].ModRevision)
			}
		}
		// Compacted revisions are gone from the history, not an error.
		if _, err := cli.Compact(ctx, h[2].ModRevision); err != nil {
			t.Fatal(err)
		}
		if h, err := s.History(ctx, "orders"); err != nil || len(h) != 2 || h[0].State.Epoch != 2 || h[1].State.Epoch != 3 {
			t.Fatalf("history after compaction: %+v, %v; want the last two writes", h, err)
		}
	})
}

// A leader writes; then it is deposed and a second session wins the
// election: the first one's delayed Save and Load return ErrNotLeader (not
// ErrConflict) and what is stored is the second leader's.
func TestEtcdFencingToken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := testenv.StartEtcdCluster(t, 1).Client(t)

	for _, how := range []string{"lease revoked", "resigned", "re-elected"} {
		t.Run(how, func(t *testing.T) {
			prefix := etcdPrefix()
			s1, e1, tok1 := campaign(ctx, t, cli, prefix, "a")
			a := NewEtcd(cli, prefix, fixedNow)
			a.SetToken(tok1)
			if err := a.Save(ctx, sample("orders", 1)); err != nil {
				t.Fatal(err)
			}
			if got := mustLoad(ctx, t, a, "orders"); got.Epoch != 1 {
				t.Fatalf("leader loads epoch %d", got.Epoch)
			}

			var next Token
			switch how {
			case "lease revoked", "resigned":
				s2, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s2.Close() })
				e2 := concurrency.NewElection(s2, prefix+"/election")
				won := make(chan error, 1)
				go func() { won <- e2.Campaign(ctx, "b") }()
				if how == "lease revoked" {
					err = s1.Close() // revokes the lease: the election key goes with it
				} else {
					err = e1.Resign(ctx)
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := <-won; err != nil {
					t.Fatalf("second campaign: %v", err)
				}
				next = Token{Key: e2.Key(), Rev: e2.Rev()}
			case "re-elected":
				// The same session resigns and wins again: the election key
				// has the same name, but a new create revision.
				if err := e1.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				if err := e1.Campaign(ctx, "a-again"); err != nil {
					t.Fatal(err)
				}
				next = Token{Key: e1.Key(), Rev: e1.Rev()}
				if next.Key != tok1.Key || next.Rev == tok1.Rev {
					t.Fatalf("re-election token %+v, first %+v: want the same key at another revision", next, tok1)
				}
			}

			// a's base is still the stored revision: only the token fails.
			err := a.Save(ctx, sample("orders", 2))
			if !errors.Is(err, ErrNotLeader) || errors.Is(err, ErrConflict) {
				t.Fatalf("deposed leader's Save: %v, want ErrNotLeader", err)
			}
			if _, err := a.Load(ctx, "orders"); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("deposed leader's Load: %v, want ErrNotLeader", err)
			}

			b := NewEtcd(cli, prefix, fixedNow)
			b.SetToken(next)
			if got := mustLoad(ctx, t, b, "orders"); got.Epoch != 1 {
				t.Fatalf("new leader loads epoch %d", got.Epoch)
			}
			if err := b.Save(ctx, withInFlight("orders", 2, "b1", "fence")); err != nil {
				t.Fatalf("new leader's Save: %v", err)
			}
			// Now both the token and the key fail for a: still deposed, first.
			if err := a.Save(ctx, sample("orders", 3)); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("deposed leader's Save after the new leader's write: %v, want ErrNotLeader", err)
			}
			got := mustLoad(ctx, t, NewEtcd(cli, prefix, fixedNow), "orders")
			if got.Epoch != 2 || got.InFlight == nil || got.InFlight.ID != "b1" {
				t.Fatalf("stored %+v, want the new leader's epoch 2 with in-flight b1", got)
			}
			h, err := b.History(ctx, "orders")
			if err != nil || len(h) != 2 || h[0].State.Epoch != 1 || h[1].State.Epoch != 2 {
				t.Fatalf("history %+v, %v: want the two leaders' writes only", h, err)
			}
		})
	}
}

// saveEventually retries a Save that failed for a transport reason (a
// member just died): a store error is final, except ErrConflict right after
// an ambiguous failure, when the earlier attempt may have landed.
func saveEventually(ctx context.Context, t *testing.T, s *Etcd, st GroupState) {
	t.Helper()
	ambiguous := false
	for {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := s.Save(rctx, st)
		cancel()
		switch {
		case err == nil:
			return
		case errors.Is(err, ErrConflict) && ambiguous:
			if got := mustLoad(ctx, t, s, st.Group); got.Epoch == st.Epoch {
				return // the earlier attempt was applied
			}
			t.Fatalf("save epoch %d: %v", st.Epoch, err)
		case errors.Is(err, ErrConflict), errors.Is(err, ErrNotLeader), errors.Is(err, ErrEpochRegression), errors.Is(err, ErrInFlightMismatch):
			t.Fatalf("save epoch %d: %v", st.Epoch, err)
		}
		ambiguous = true
		select {
		case <-ctx.Done():
			t.Fatalf("save epoch %d: %v", st.Epoch, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Three members, one per site: the store keeps working with any one of
// them killed, the raft leader included, and the token keeps fencing.
func TestEtcdStoreSurvivesOneMemberKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := testenv.StartEtcdCluster(t, 3)
	cli := c.Client(t)
	s, prefix := leading(ctx, t, cli)
	saveEventually(ctx, t, s, sample("orders", 1))

	// Kill the raft leader: the hardest member to lose.
	var victim *testenv.EtcdMember
	for _, m := range c.Members {
		st, err := cli.Status(ctx, m.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		if st.Leader == st.Header.MemberId {
			victim = m
		}
	}
	if victim == nil {
		t.Fatal("no member is the raft leader")
	}
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	saveEventually(ctx, t, s, sample("orders", 2))
	if got := mustLoad(ctx, t, s, "orders"); got.Epoch != 2 {
		t.Fatalf("stored epoch %d with %s down, want 2", got.Epoch, victim.Name)
	}
	if err := victim.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// Another member down now, the restarted one serving.
	other := c.Members[(indexOf(c.Members, victim)+1)%3]
	if err := other.Kill(); err != nil {
		t.Fatal(err)
	}
	saveEventually(ctx, t, s, sample("orders", 3))
	got := mustLoad(ctx, t, NewEtcd(victim.Client(t), prefix, fixedNow), "orders")
	if got.Epoch != 3 {
		t.Fatalf("the restarted member serves epoch %d, want 3", got.Epoch)
	}
	h, err := s.History(ctx, "orders")
	if err != nil || len(h) != 3 {
		t.Fatalf("history %+v, %v: want 3 writes", h, err)
	}
}

func indexOf(ms []*testenv.EtcdMember, m *testenv.EtcdMember) int {
	for i, x := range ms {
		if x == m {
			return i
		}
	}
	return -1
}
