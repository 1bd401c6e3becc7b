package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

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
// within a third of the TTL (it stops acting before the lease can expire
// and another daemon be elected), or with ctx. The key's create revision is
// the fencing token every state write of the term is conditioned on.
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
		d.etcdStore.SetToken(tok)
		go d.etcdWatchdog(term, resign, sess, tok, le.LeaseDuration)
		d.startTerm(term, resign)
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

// etcdWatchdog ends the term when the session ends or when the leader key
// could not be confirmed for a third of the TTL: the server expires the
// lease no earlier than a full TTL after the last renewal it received, so a
// leader cut off from the quorum stops acting before anyone else can lead.
func (d *Daemon) etcdWatchdog(term context.Context, resign func(), sess *concurrency.Session, tok store.Token, ttl time.Duration) {
	limit := ttl / 3
	every := max(ttl/10, 50*time.Millisecond)
	lastOK := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-term.Done():
			return
		case <-sess.Done():
			d.log.Warn("leader.session_ended", "identity", d.opts.Identity)
			resign()
			return
		case <-tick.C:
		}
		cctx, cancel := context.WithTimeout(term, every)
		resp, err := d.etcd.Get(cctx, tok.Key)
		cancel()
		switch {
		case err == nil && len(resp.Kvs) == 1 && resp.Kvs[0].CreateRevision == tok.Rev:
			lastOK = time.Now()
		case err == nil:
			// The key is gone or recreated: another daemon may lead now.
			d.log.Warn("leader.key_lost", "identity", d.opts.Identity)
			resign()
			return
		case errors.Is(err, context.Canceled) && term.Err() != nil:
			return
		}
		if since := time.Since(lastOK); since > limit {
			d.log.Warn("leader.stepped_down", "identity", d.opts.Identity, "unconfirmed_for", since.String(), "limit", limit.String())
			resign()
			return
		}
	}
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
