package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/failoverd/failoverd/mysqlctl"
)

// The semi-sync roles: the source side belongs on the primary only, the
// replica side on the replicas that acknowledge its commits
// (docs/design.md, "Semi-sync roles and stalled writes").

// sourceOff switches the semi-sync source side off on each of sites that
// still has it on (re-read first), leaving its replica side as it is (so a
// running IO thread is not restarted): on a replica the source side makes
// the applier's commits wait for acknowledgements nobody sends. Every site
// is tried; the errors are joined.
func (sv *servers) sourceOff(ctx context.Context, sites []string) error {
	var errs []error
	for _, s := range sites {
		err := sv.on(ctx, s, stepTimeout, func(ctx context.Context, in Instance) error {
			st, err := in.Status(ctx)
			if err != nil {
				return fmt.Errorf("read semi-sync settings: %w", err)
			}
			if !st.SemiSync.PrimaryEnabled {
				return nil
			}
			if err := in.SetSemiSync(ctx, false, st.SemiSync.ReplicaEnabled); err != nil {
				return err
			}
			sv.log.Warn("semisync.source_disabled", "site", s, "why", "replica", "waiting_appliers", st.AckWaits.Appliers,
				"note", "the semi-sync source side belongs on the primary only: on a replica its applier waits for acknowledgements nobody sends")
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("switch the semi-sync source side off on %s: %w", s, err))
		}
	}
	return errors.Join(errs...)
}

// semiSync carries semi-synchronous replication over to the topology that a
// promotion made, best effort: every site is tried and the errors joined.
//
// Semi-sync counts as in use when the new primary supports it
// (Status.SemiSync.Available) and either one of primary and replicas has
// the primary side enabled (configurations that let any site become primary
// enable it everywhere) or the new primary had its replica side enabled (it
// acknowledged the old primary's commits; with the old primary gone that is
// the trace an asymmetric configuration leaves). Otherwise nothing changes:
// an asynchronous group stays asynchronous.
//
// When in use, each replica gets the replica side (its primary side left as
// is; SetSemiSync restarts a running IO thread so it takes effect), then the
// new primary gets the primary side (its replica side left as is) if at
// least one replica has the replica side: with nobody to acknowledge, the
// first commit would only stall for rpl_semi_sync_master_timeout. A primary
// side that is already on stays on.
func (sv *servers) semiSync(ctx context.Context, primary string, replicas []string) error {
	status := func(site string) (mysqlctl.Status, error) {
		var st mysqlctl.Status
		err := sv.on(ctx, site, stepTimeout, func(ctx context.Context, in Instance) (err error) { st, err = in.Status(ctx); return err })
		return st, err
	}
	pst, err := status(primary)
	if err != nil {
		return fmt.Errorf("semi-sync: status of %s: %w", primary, err)
	}
	var errs []error
	used := pst.SemiSync.PrimaryEnabled || pst.SemiSync.ReplicaEnabled
	rsts := map[string]mysqlctl.SemiSyncStatus{}
	for _, r := range replicas {
		st, err := status(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("semi-sync: status of %s: %w", r, err))
			continue
		}
		rsts[r] = st.SemiSync
		used = used || st.SemiSync.PrimaryEnabled
	}
	if !pst.SemiSync.Available || !used {
		sv.log.Info("semisync.not_in_use", "primary", primary, "available", pst.SemiSync.Available)
		return errors.Join(errs...)
	}
	acks := 0
	for _, r := range replicas {
		rs, ok := rsts[r]
		if !ok {
			continue
		}
		if rs.ReplicaEnabled && !rs.PrimaryEnabled {
			acks++
			continue
		}
		// Replica side on; primary side off: on a replica it would make the
		// applier wait for acknowledgements nobody sends (forever with the
		// infinite timeout the semisync proof needs).
		err := sv.on(ctx, r, stepTimeout, func(ctx context.Context, in Instance) error { return in.SetSemiSync(ctx, false, true) })
		if err != nil {
			errs = append(errs, fmt.Errorf("semi-sync: replica side on %s: %w", r, err))
			continue
		}
		acks++
		sv.log.Info("semisync.replica_enabled", "site", r)
	}
	switch {
	case pst.SemiSync.PrimaryEnabled:
	case acks == 0:
		sv.log.Warn("semisync.primary_not_enabled", "site", primary, "reason", "no replica acknowledges")
	default:
		err := sv.on(ctx, primary, stepTimeout, func(ctx context.Context, in Instance) error {
			return in.SetSemiSync(ctx, true, pst.SemiSync.ReplicaEnabled)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("semi-sync: primary side on %s: %w", primary, err))
		} else {
			sv.log.Info("semisync.primary_enabled", "site", primary, "replicas", acks)
		}
	}
	return errors.Join(errs...)
}
