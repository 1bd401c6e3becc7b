package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/store"
)

// openEtcd connects to the etcd cluster of the etcd store.
func openEtcd(e configs.Etcd) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: e.Endpoints, DialTimeout: e.DialTimeout, Logger: zap.NewNop(),
		// Without keepalives a dead member is noticed only by a request's deadline.
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second}
	if t := e.TLS; t.CAFile != "" || t.CertFile != "" {
		tc, err := configs.ClientTLS(t.CAFile, t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd tls: %w", err)
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to etcd %v: %w", e.Endpoints, err)
	}
	return cli, nil
}

// electEtcd runs leader election in etcd until ctx ends: a session (a lease
// with the configured TTL) and an election key under the store's prefix. A
// leader's term ends when its session ends, when it cannot confirm its key
// or renew its lease within a third of the TTL (it stops acting before the
// lease can expire and another daemon be elected), or with ctx. The key's
// create revision is the fencing token every state write of the term is
// conditioned on.
func (d *Daemon) electEtcd(ctx context.Context) error {
	le := d.cfg.Daemon.LeaderElection
	ttl := int(le.LeaseDuration / time.Second)
	prefix := d.cfg.Daemon.StateStore.Etcd.Prefix + "/leader"
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(d.etcd, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
		if err != nil {
			d.log.Warn("leader.session_failed", "err", err)
			d.pause(ctx, le.RetryPeriod)
			continue
		}
		d.lead.setSession(fmt.Sprintf("etcd session %x, ttl %ds", sess.Lease(), ttl))
		e := concurrency.NewElection(sess, prefix)
		octx, stopObserve := context.WithCancel(ctx)
		go d.observeEtcdLeader(octx, e)
		// A session that expires while campaigning (cut off from the
		// quorum) ends the campaign: its key is gone, so it could never win.
		cctx, stopCampaign := context.WithCancel(ctx)
		go func() {
			select {
			case <-sess.Done():
				stopCampaign()
			case <-cctx.Done():
			}
		}()
		err = e.Campaign(cctx, d.opts.Identity)
		stopCampaign()
		if err != nil {
			stopObserve()
			_ = sess.Close()
			d.lead.setSession("")
			if ctx.Err() == nil {
				d.log.Warn("leader.campaign_failed", "err", err)
				d.pause(ctx, le.RetryPeriod)
			}
			continue
		}
		tok := store.Token{Key: e.Key(), Rev: e.Rev()}
		term, resign := context.WithCancel(ctx)
		w := newEtcdWatch(d.etcd, tok, sess.Lease(), le.LeaseDuration, time.Now)
		// The term rests on a keep-alive sent after the campaign won (which
		// may have waited long for the previous leader to go).
		if s := w.round(term); s != nil {
			d.log.Warn(s.msg, append([]any{"identity", d.opts.Identity}, s.attrs...)...)
			resign()
		} else {
			d.etcdStore.SetToken(tok)
			go d.etcdWatchdog(term, resign, sess.Done(), w)
			go w.renew.watch(term, func(last time.Time) { d.leaseExpiring(term, resign, last, w.limit) })
			d.startTerm(term, resign, w.renew)
		}
		<-term.Done()
		d.lead.end()
		d.etcdStore.SetToken(store.Token{})
		d.log.Warn("leader.lost", "identity", d.opts.Identity)
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = e.Resign(rctx) // best effort: the session's lease ends it anyway
		cancel()
		stopObserve()
		_ = sess.Close()
		d.lead.setSession("")
		d.pause(ctx, le.RetryPeriod)
	}
	return nil
}

// etcdLeaseAPI is what the etcd watchdog asks of the etcd client.
type etcdLeaseAPI interface {
	Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error)
	KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error)
}

// etcdWatch checks, round after round, that this daemon still leads in
// etcd: its election key is there with the token's create revision, and its
// session lease was renewed (a keep-alive of its own, timed from when it was
// sent: the session's keep-alives can stall on one member while reads
// succeed on another).
type etcdWatch struct {
	cli   etcdLeaseAPI
	tok   store.Token
	lease clientv3.LeaseID
	limit time.Duration // a third of the TTL
	every time.Duration // between rounds, and each call's timeout
	now   func() time.Time

	confirmed time.Time   // when the latest Get that found the key was sent
	renew     *leaseGuard // the latest keep-alive that succeeded, limit after it
}

func newEtcdWatch(cli etcdLeaseAPI, tok store.Token, lease clientv3.LeaseID, ttl time.Duration, now func() time.Time) *etcdWatch {
	return &etcdWatch{cli: cli, tok: tok, lease: lease, limit: ttl / 3, every: max(ttl/10, 50*time.Millisecond), now: now,
		confirmed: now(), renew: newLeaseGuard(now, ttl/3)}
}

// stop is why a term must end: a stable log message key and its attributes.
type stop struct {
	msg   string
	attrs []any
}

// round checks once; a non-nil stop ends the term.
func (w *etcdWatch) round(ctx context.Context) *stop {
	sent := w.now()
	cctx, cancel := context.WithTimeout(ctx, w.every)
	resp, err := w.cli.Get(cctx, w.tok.Key)
	cancel()
	switch {
	case err == nil && len(resp.Kvs) == 1 && resp.Kvs[0].CreateRevision == w.tok.Rev:
		w.confirmed = sent
	case err == nil:
		// The key is gone or recreated: another daemon may lead now.
		return &stop{msg: "leader.key_lost"}
	}
	sent = w.now()
	cctx, cancel = context.WithTimeout(ctx, w.every)
	_, err = w.cli.KeepAliveOnce(cctx, w.lease)
	cancel()
	switch {
	case err == nil:
		w.renew.renewed(sent)
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		// Expired: the election key went with it.
		return &stop{msg: "leader.lease_expired"}
	}
	if since := w.now().Sub(w.confirmed); since > w.limit {
		return &stop{msg: "leader.stepped_down", attrs: []any{"unconfirmed_for", since.String(), "limit", w.limit.String()}}
	}
	// Guards against acting on a lease the server may expire soon: no
	// keep-alive got through for a third of its TTL.
	if w.renew.left() <= 0 {
		return &stop{msg: "leader.lease_unrenewed", attrs: []any{"unrenewed_for", w.now().Sub(w.renew.lastRenewal()).String(), "limit", w.limit.String()}}
	}
	return nil
}

// etcdWatchdog ends the term when the session ends or a round of w says
// so: the server expires the lease no earlier than a full TTL after the last
// renewal it received, so a leader cut off from the quorum stops acting
// before anyone else can lead.
func (d *Daemon) etcdWatchdog(term context.Context, resign func(), sessDone <-chan struct{}, w *etcdWatch) {
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for {
		select {
		case <-term.Done():
			return
		case <-sessDone:
			d.log.Warn("leader.session_ended", "identity", d.opts.Identity)
			resign()
			return
		case <-tick.C:
		}
		if s := w.round(term); s != nil {
			if term.Err() != nil {
				return
			}
			d.log.Warn(s.msg, append([]any{"identity", d.opts.Identity}, s.attrs...)...)
			resign()
			return
		}
	}
}

// leaseExpiring ends the term whose lease was last renewed (request sent)
// at last, limit ago: another daemon may soon lead.
func (d *Daemon) leaseExpiring(term context.Context, resign func(), last time.Time, limit time.Duration) {
	if term.Err() != nil {
		return
	}
	d.log.Warn("leader.lease_unrenewed", "identity", d.opts.Identity, "last_renewal", last, "limit", limit.String())
	resign()
}

// observeEtcdLeader records who leads, for readiness and status.
func (d *Daemon) observeEtcdLeader(ctx context.Context, e *concurrency.Election) {
	for resp := range e.Observe(ctx) {
		if len(resp.Kvs) > 0 {
			d.lead.observed(string(resp.Kvs[0].Value))
		}
	}
}

// pause waits for d or ctx.
func (d *Daemon) pause(ctx context.Context, dur time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(dur):
	}
}
