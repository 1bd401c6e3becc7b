package daemon

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
)

// cloningInstance is a fakeInstance that can CLONE (MySQL).
type cloningInstance struct {
	fakeInstance
	mu     *sync.Mutex
	donors *[]mysqlctl.Donor
}

func (c cloningInstance) CloneFrom(_ context.Context, d mysqlctl.Donor, timeout time.Duration) error {
	c.note("clone")
	c.mu.Lock()
	defer c.mu.Unlock()
	if timeout <= 0 {
		panic("clone without a timeout")
	}
	*c.donors = append(*c.donors, d)
	return nil
}

// On MySQL without reclone.command a reclone request is persisted before
// the site is touched, then the site is fenced, detached and CLONEd from
// the primary's replication address with the admin account, and once it is
// read-only and contained in the primary the reclone and the divergence
// are cleared, with the outcome in the history; then it rejoins.
func TestRecloneOnMySQLClonesFromThePrimary(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "admin.pw")
	if err := os.WriteFile(pwFile, []byte("admin-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := configs.Group{Name: "g", Engine: configs.EngineMySQL, PollInterval: 10 * time.Millisecond,
		Reclone: configs.Reclone{Timeout: time.Minute},
		Sites: []configs.Site{
			{Name: "a", MySQL: configs.MySQLEndpoint{Address: "10.0.0.1:3306", ReplicationAddress: "db-a.internal:3307"}},
			{Name: "c", MySQL: configs.MySQLEndpoint{Address: "10.0.0.3:3306"}}}}
	cfg.Credentials.Admin = configs.Account{User: "failoverd", PasswordFile: pwFile}
	ops := &opLog{}
	var mu sync.Mutex
	var donors []mysqlctl.Donor
	primary := gtid.MustParse(gtid.MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10")
	dial := func(_ context.Context, s configs.Site) (Instance, error) {
		return cloningInstance{fakeInstance: fakeInstance{site: s.Name, log: ops, executed: primary}, mu: &mu, donors: &donors}, nil
	}
	errant := "00000000-0000-0000-0000-000000000003:1-2"
	ms := newTestStore(t, store.GroupState{Group: "g", Epoch: 3, ActiveSite: "a",
		Diverged: map[string]string{"c": errant}, DivergedCount: map[string]uint64{"c": 2}})
	g := &group{cfg: cfg, flavor: gtid.MySQL, policy: sitepair.DefaultPolicy(), store: ms, pub: &publisher{}, now: clockAt(t0),
		log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg),
		requests: make(chan request), reclones: map[string]bool{}, recloned: make(chan recloneResult)}
	g.servers = &servers{group: cfg, conns: newConnections(dial, cfg.Sites), log: g.log, secret: func() (string, error) { return "pw", nil }}
	if err := g.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	// After the copy c holds a prefix of the primary's history.
	g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Writable, Executed: primary},
		{Name: "c", Role: sitepair.PrimaryCandidate, Index: 1, State: statemachine.ReadOnly,
			Executed: gtid.MustParse(gtid.MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9")},
	}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lead := func() (context.Context, time.Time, bool) { return ctx, t0, true }
	done := make(chan struct{})
	go func() { g.run(ctx, lead); close(done) }()
	defer func() { cancel(); <-done }()

	if err := g.submit(ctx, request{kind: kindReclone, target: "c", token: "c", by: "ann"}); err == nil || !strings.Contains(err.Error(), "wrong reclone token") {
		t.Fatalf("reclone with the site name while a divergence is recorded: %v", err)
	}
	if ops.has("c:fence") {
		t.Fatal("a refused reclone touched the site")
	}
	if err := g.submit(ctx, request{kind: kindReclone, target: "c", token: errant[:12], by: "ann"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := ms.Load(ctx, "g")
		if len(st.Recloning) == 0 && len(st.Diverged) == 0 {
			results := []string{}
			for _, a := range st.Audit {
				if a.Action == store.AuditReclone {
					results = append(results, a.Result)
				}
			}
			if len(results) != 3 || !strings.HasPrefix(results[0], "refused: ") || results[1] != store.AuditAccepted+": discarding what the donor a lacks: "+errant || results[2] != "succeeded" {
				t.Fatalf("history of the reclone: %q", results)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reclone not recorded done: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for !ops.has("c:repoint") { // then it rejoins the primary
		if time.Now().After(deadline) {
			t.Fatalf("c not rejoined after the reclone: %v", ops)
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := ops.list()
	order := []string{"c:fence", "c:stop", "c:reset", "c:clone", "c:repoint"}
	last := -1
	for _, op := range order {
		i := slices.Index(got, op)
		if i <= last {
			t.Fatalf("ops %v: want %v in this order", got, order)
		}
		last = i
	}
	mu.Lock()
	defer mu.Unlock()
	want := mysqlctl.Donor{Host: "db-a.internal", Port: 3307, User: "failoverd", Password: "admin-pw"}
	if len(donors) != 1 || donors[0] != want {
		t.Fatalf("cloned from %+v, want %+v", donors, want)
	}
}

// A reclone the store says runs but no job of this daemon runs (its leader
// stopped mid-copy) is recorded failed, so the half-copied site stays out
// of every decision until a human retries.
func TestInterruptedRecloneIsRecordedFailed(t *testing.T) {
	ms := newTestStore(t, store.GroupState{Group: "g", Epoch: 3, ActiveSite: "a",
		Recloning: map[string]store.Reclone{"c": {Donor: "a", Epoch: 3, At: t0, By: "ann"}}})
	cfg := configs.Group{Name: "g", Engine: configs.EngineMariaDB, Sites: []configs.Site{{Name: "a"}, {Name: "c"}}}
	g := &group{cfg: cfg, flavor: gtid.MariaDB, policy: sitepair.DefaultPolicy(), store: ms, pub: &publisher{}, now: clockAt(t0),
		log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg), reclones: map[string]bool{}}
	if err := g.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.interruptedReclones(context.Background())
	st, _ := ms.Load(context.Background(), "g")
	if r := st.Recloning["c"]; r.Failed != errInterrupted {
		t.Fatalf("reclone after the restart: %+v", r)
	}
	// Recorded once: a failed reclone is not "interrupted" again.
	g.interruptedReclones(context.Background())
	if st2, _ := ms.Load(context.Background(), "g"); len(st2.Audit) != 1 {
		t.Fatalf("history %+v, want one entry", st2.Audit)
	}
}

// recloneTestGroup is a MySQL group a (primary) and c whose servers hold
// held (a site missing from held cannot be reached), while the group's
// observations say obsC of c: they may predate what c holds now.
func recloneTestGroup(t *testing.T, held map[string]gtid.Set, obsC gtid.Set) (*group, *watchedStore, *opLog) {
	t.Helper()
	cfg := configs.Group{Name: "g", Engine: configs.EngineMySQL, PollInterval: 10 * time.Millisecond,
		Reclone: configs.Reclone{Timeout: time.Minute},
		Sites:   []configs.Site{{Name: "a", MySQL: configs.MySQLEndpoint{Address: "10.0.0.1:3306"}}, {Name: "c", MySQL: configs.MySQLEndpoint{Address: "10.0.0.3:3306"}}}}
	cfg.Credentials.Admin = configs.Account{User: "failoverd", PasswordFile: filepath.Join(t.TempDir(), "none")}
	ops := &opLog{}
	var mu sync.Mutex
	var donors []mysqlctl.Donor
	dial := func(_ context.Context, s configs.Site) (Instance, error) {
		set, ok := held[s.Name]
		if !ok {
			return nil, errors.New("dial tcp " + s.MySQL.Address + ": connect: connection refused")
		}
		return cloningInstance{fakeInstance: fakeInstance{site: s.Name, log: ops, executed: set}, mu: &mu, donors: &donors}, nil
	}
	ms := newTestStore(t, store.GroupState{Group: "g", Epoch: 3, ActiveSite: "a"})
	g := &group{cfg: cfg, flavor: gtid.MySQL, policy: sitepair.DefaultPolicy(), store: ms, pub: &publisher{}, now: clockAt(t0),
		log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg),
		requests: make(chan request), reclones: map[string]bool{}, recloned: make(chan recloneResult, 1)}
	g.servers = &servers{group: cfg, conns: newConnections(dial, cfg.Sites), log: g.log, secret: func() (string, error) { return "pw", nil }}
	if err := g.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Writable, Executed: gtid.MustParse(gtid.MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10")},
		{Name: "c", Role: sitepair.PrimaryCandidate, Index: 1, State: statemachine.ReadOnly, Executed: obsC},
	}}}
	return g, ms, ops
}

// A site not recorded as diverged that holds transactions the donor lacks
// (an old primary back this round, an operator-fenced site never marked)
// is not wiped with its bare name as the token: the request is checked
// against a fresh read of both sites, not the last round's observations
// (which here still show c contained), and the refusal names the set to
// repeat. With that set's start as the token the reclone goes ahead.
func TestRecloneOfAnUnmarkedSiteHoldingTransactionsTheDonorLacksNeedsTheirSet(t *testing.T) {
	primary := gtid.MustParse(gtid.MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10,4d8b2e3a-0f1c-11ef-8b2a-0242ac120002:1-5")
	c := gtid.MustParse(gtid.MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-12")
	g, ms, ops := recloneTestGroup(t, map[string]gtid.Set{"a": primary, "c": c}, gtid.MustParse(gtid.MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lead := func() (context.Context, time.Time, bool) { return ctx, t0, true }

	err := g.handle(request{kind: kindReclone, target: "c", token: "c", by: "ann"}, lead)
	if err == nil {
		t.Fatalf("c holds 3e11fa47-71ca-11e1-9e33-c80aa9429562:11-12 that a lacks, yet a reclone with token %q was accepted (ops %v)", "c", ops)
	}
	if !errors.Is(err, ErrRefused) || !errors.Is(err, sitepair.ErrRecloneToken) ||
		!strings.Contains(err.Error(), "3e11fa47-71ca-11e1-9e33-c80aa9429562:11-12") {
		t.Fatalf("refusal %q: want a wrong-token refusal naming the set c alone holds", err)
	}
	if ops.has("c:fence") {
		t.Fatal("a refused reclone touched the site")
	}
	if st, _ := ms.Load(ctx, "g"); len(st.Recloning) != 0 {
		t.Fatalf("a refused reclone was recorded: %+v", st.Recloning)
	}
	if err := g.handle(request{kind: kindReclone, target: "c", token: "3e11fa47", by: "ann"}, lead); err != nil {
		t.Fatalf("reclone with the start of the set c alone holds: %v", err)
	}
	st, _ := ms.Load(ctx, "g")
	if _, ok := st.Recloning["c"]; !ok {
		t.Fatalf("accepted reclone not recorded: %+v", st)
	}
	a := st.Audit[len(st.Audit)-1]
	if !strings.HasPrefix(a.Result, store.AuditAccepted) || !strings.Contains(a.Result, "3e11fa47-71ca-11e1-9e33-c80aa9429562:11-12") {
		t.Fatalf("history %q: want what the reclone throws away", a.Result)
	}
}

// A site whose history the donor holds still takes its bare name as the
// token (nothing is lost); one that cannot be read now is refused before
// anything is recorded (what it holds is unknown).
func TestRecloneOfAContainedSiteTakesItsNameAndAnUnreadableOneIsRefused(t *testing.T) {
	primary := gtid.MustParse(gtid.MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10")
	behind := gtid.MustParse(gtid.MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-7")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lead := func() (context.Context, time.Time, bool) { return ctx, t0, true }

	g, ms, _ := recloneTestGroup(t, map[string]gtid.Set{"a": primary, "c": behind}, behind)
	if err := g.handle(request{kind: kindReclone, target: "c", token: "c", by: "ann"}, lead); err != nil {
		t.Fatalf("reclone of a contained site with its name: %v", err)
	}
	if st, _ := ms.Load(ctx, "g"); st.Recloning["c"].Donor != "a" {
		t.Fatalf("reclone not recorded: %+v", st.Recloning)
	}

	g, ms, ops := recloneTestGroup(t, map[string]gtid.Set{"a": primary}, behind)
	err := g.handle(request{kind: kindReclone, target: "c", token: "c", by: "ann"}, lead)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("reclone of a site that cannot be read: %v, want refused naming why", err)
	}
	if st, _ := ms.Load(ctx, "g"); len(st.Recloning) != 0 || ops.has("c:fence") {
		t.Fatalf("a refused reclone was recorded or touched the site: %+v %v", st.Recloning, ops)
	}
}
