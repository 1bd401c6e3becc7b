package daemon

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Leader election on a Kubernetes Lease (etcd.go: in etcd).

// elect runs leader election on a Lease until ctx ends. Only the leader acts;
// a leader that loses the lease stops acting at once: every action's context
// derives from the term's context, which client-go cancels when renewal fails.
func (d *Daemon) elect(ctx context.Context) error {
	if d.etcd != nil {
		return d.electEtcd(ctx)
	}
	le := d.cfg.Daemon.LeaderElection
	cl, err := d.clusters.Client(le.Cluster)
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.Namespace, le.LeaseName, cl.CoreV1(), cl.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: d.opts.Identity})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	return d.electLease(ctx, lock)
}

// electLease runs client-go's leader election on lock until ctx ends. A
// term also ends, whatever client-go does, HeldLease less StepDownMargin
// after the last renewal that succeeded was sent: client-go cancels the
// term's context only after it tried, up to renewDeadline more, to release
// the Lease, and another daemon may take it HeldLease after that renewal.
func (d *Daemon) electLease(ctx context.Context, lock resourcelock.Interface) error {
	le := d.cfg.Daemon.LeaderElection
	for ctx.Err() == nil {
		// One term per iteration; cancelling term gives the Lease up
		// (ReleaseOnCancel) so another daemon can lead.
		term, resign := context.WithCancel(ctx)
		guard := newLeaseGuard(time.Now, le.HeldLease()-le.StepDownMargin())
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &renewalLock{Interface: lock, now: time.Now, guard: guard}, LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
			ReleaseOnCancel: true, Name: "failoverd",
			Callbacks: leaderelection.LeaderCallbacks{
				OnNewLeader: d.lead.observed,
				OnStartedLeading: func(lctx context.Context) {
					lctx, end := context.WithCancel(lctx)
					stop := func() { end(); resign() }
					go guard.watch(lctx, func(last time.Time) { d.leaseExpiring(lctx, stop, last, guard.limit) })
					if !d.claimConfigMap(lctx, stop, guard) {
						return
					}
					d.startTerm(lctx, stop, guard)
				},
				OnStoppedLeading: func() {
					d.lead.end()
					d.log.Warn("leader.lost", "identity", d.opts.Identity)
				},
			},
		})
		if err != nil {
			resign()
			// configs.Validate checks the same timing rules; reaching this is a bug.
			return fmt.Errorf("leader election: %w", err)
		}
		elector.Run(term)
		resign()
		d.lead.end()
		if ctx.Err() == nil {
			// Give another daemon a chance to take the Lease after we resigned.
			select {
			case <-ctx.Done():
			case <-time.After(le.RetryPeriod):
			}
		}
	}
	return nil
}

// claimConfigMap claims the next term in the ConfigMap store (if that is
// the store) before the term loads or writes anything, so the previous
// leader's late writes fail; the term's end ends the claim. One that cannot
// claim resigns.
func (d *Daemon) claimConfigMap(lctx context.Context, resign func(), guard *leaseGuard) bool {
	if d.cmStore == nil {
		return true
	}
	term, err := d.cmStore.Claim(lctx, d.opts.Identity, func() bool { return guard.left() > 0 })
	if err != nil {
		d.log.Error("leader.claim_failed", "identity", d.opts.Identity, "store", d.cmStore.Describe(), "err", err)
		resign()
		return false
	}
	context.AfterFunc(lctx, func() { d.cmStore.EndTerm(term) })
	d.log.Info("leader.claimed", "identity", d.opts.Identity, "store", d.cmStore.Describe(), "term", term)
	return true
}

// renewalLock passes client-go's Lease calls through and tells guard when
// a write of this daemon's record (acquisition or renewal) succeeded, with
// the time it was sent: the Lease runs from no earlier than that.
type renewalLock struct {
	resourcelock.Interface
	now   func() time.Time
	guard *leaseGuard
}

func (l *renewalLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	sent := l.now()
	err := l.Interface.Create(ctx, r)
	if err == nil && r.HolderIdentity == l.Identity() {
		l.guard.renewed(sent)
	}
	return err
}

func (l *renewalLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	sent := l.now()
	err := l.Interface.Update(ctx, r)
	if err == nil && r.HolderIdentity == l.Identity() {
		l.guard.renewed(sent)
	}
	return err
}
