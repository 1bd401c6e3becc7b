package mysqlctl

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Donor is the server CloneFrom copies from.
type Donor struct {
	Host string
	// Port defaults to 3306.
	Port int
	// User and Password of an account with BACKUP_ADMIN on the donor.
	User, Password string
	// TLS requires an encrypted clone connection (REQUIRE SSL).
	TLS bool
}

// clonePoll is how often CloneFrom checks whether the restarted server
// reports the clone outcome.
const clonePoll = 500 * time.Millisecond

// Server/client error numbers that mean "the session ended", which is how a
// successful CLONE with automatic restart looks from the client.
const (
	errServerShutdown   = 1053 // ER_SERVER_SHUTDOWN
	errConnectionKilled = 1927 // ER_CONNECTION_KILLED
	errServerGone       = 2006 // CR_SERVER_GONE_ERROR
	errServerLost       = 2013 // CR_SERVER_LOST
)

// CloneFrom replaces all data of this (MySQL) server with a physical copy of
// donor: SET GLOBAL clone_valid_donor_list, then CLONE INSTANCE FROM. The
// server restarts when the clone completes, which ends the session; that, or
// error 3707 (clone done but mysqld is not supervised and must be started by
// hand), counts as success. After a lost session CloneFrom waits (within
// ctx) for the server to answer again and checks
// performance_schema.clone_status, returning ErrCloneFailed unless it says
// Completed. The clone plugin must be loaded on both sides (else
// ErrNotSupported). On MariaDB it returns ErrNotSupported naming the manual
// mariadb-backup procedure.
//
// The server must be fenced (read_only) first, so a live primary is never
// wiped by mistake (ErrNotFenced), and must not replicate (ErrReplicaRunning:
// stop and reset replication first). MySQL refuses CLONE INSTANCE while
// super_read_only is ON (error 1290), so CloneFrom lifts super_read_only for
// the clone only; read_only stays ON throughout, which still refuses every
// application account. super_read_only is set again when CLONE fails, and
// on the restarted server once the clone is verified, so the server ends
// fenced as it was found (a server that restarts by itself comes back with
// its own configuration, which must start it read-only).
//
// timeout bounds the whole call: the copy (whose session has no read
// timeout, since CLONE answers only when it is done), the restart and the
// verification; it must be positive. When it passes the error wraps
// context.DeadlineExceeded and the clone's outcome is unknown.
func (i *Instance) CloneFrom(ctx context.Context, donor Donor, timeout time.Duration) error {
	const op = "clone"
	if i.d.clone == nil {
		return i.fail(op, "", fmt.Errorf("%w: %s", ErrNotSupported, i.d.cloneUnsupported))
	}
	if timeout <= 0 {
		return i.fail(op, "check timeout", fmt.Errorf("%w: timeout %v", ErrInvalidArgument, timeout))
	}
	stmts, err := i.d.clone(donor)
	if err != nil {
		return i.fail(op, "build statement", err, donor.Password)
	}
	// The long session has no read timeout: without this deadline a donor
	// that stops answering would hold the caller forever.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := i.readOnly(ctx)
	if err != nil {
		return i.fail(op, "check fence", err)
	}
	// CLONE drops every table on the recipient: refuse on a writable server.
	if !st.ReadOnly {
		return i.fail(op, "check fence", ErrNotFenced)
	}
	rep, err := i.replicaStatus(ctx)
	if err != nil {
		return i.fail(op, "read replica status", err)
	}
	// An applier writing while super_read_only is lifted for the copy would
	// race CLONE on the data it replaces.
	if rep != nil && (rep.IOThread.Running() || rep.SQLThread.Running()) {
		return i.fail(op, "check replication", fmt.Errorf("%w: IO=%s SQL=%s", ErrReplicaRunning, rep.IOThread, rep.SQLThread))
	}
	q, closeSession, err := i.openLong(ctx)
	if err != nil {
		return i.fail(op, "open session", err)
	}
	defer func() { _ = closeSession() }()
	if err := q.exec(ctx, stmts[0]); err != nil {
		if errNumber(err) == errUnknownSystemVar {
			err = fmt.Errorf("%w: clone plugin not loaded (%w)", ErrNotSupported, err)
		}
		return i.fail(op, "set donor list", err)
	}
	lifted := false
	// CLONE INSTANCE on a super_read_only recipient fails with error 1290.
	if st.SuperReadOnly && i.d.cloneUnfence != "" {
		if err := q.exec(ctx, i.d.cloneUnfence); err != nil {
			return i.fail(op, "lift super_read_only", err)
		}
		lifted = true
		i.log.Info("mysqlctl: super_read_only lifted for CLONE, read_only stays on", "addr", i.addr)
	}
	err = q.exec(ctx, stmts[1])
	switch {
	case err == nil:
		// Only CLONE ... DATA DIRECTORY returns normally; still verify.
	case errNumber(err) == errCloneRestartFails:
		i.log.Warn("mysqlctl: clone completed, mysqld must be started by hand", "addr", i.addr, "donor_host", donor.Host)
		// The server may still run until it is restarted by hand: fenced, not
		// left with only read_only. It may also be gone already.
		if lifted {
			if ferr := i.restoreFence(ctx); ferr != nil {
				i.log.Warn("mysqlctl: could not set super_read_only again after the clone (the server may be down for its restart)",
					"addr", i.addr, "err", ferr)
			}
		}
		return nil
	case sessionLost(err):
		i.log.Info("mysqlctl: clone session ended, waiting for restart", "addr", i.addr)
	default:
		cerr := i.fail(op, "clone instance", err, donor.Password)
		// A failed CLONE leaves the server as it was: fenced again, not with
		// super_read_only off.
		if lifted {
			if ferr := i.restoreFence(ctx); ferr != nil {
				return errors.Join(cerr, i.fail(op, "restore super_read_only", ferr))
			}
		}
		return cerr
	}
	if err := i.verifyClone(ctx); err != nil {
		// A clone the restarted server reports failed left its old data: fenced
		// as it was found, whatever its configuration says.
		if errors.Is(err, ErrCloneFailed) {
			if ferr := i.restoreFence(ctx); ferr != nil {
				return errors.Join(err, i.fail(op, "restore super_read_only", ferr))
			}
		}
		return err
	}
	// The restarted server's own configuration decides its read-only state:
	// one that starts writable must not come out of a reclone as a primary.
	if err := i.fence(ctx); err != nil {
		return i.fail(op, "fence the cloned server", err)
	}
	return nil
}

// cloneFenceRestore bounds setting super_read_only again after CLONE, even
// when CloneFrom's own timeout has passed.
const cloneFenceRestore = 10 * time.Second

// restoreFence sets the fence again after CLONE, within cloneFenceRestore
// of now whatever is left of ctx.
func (i *Instance) restoreFence(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cloneFenceRestore)
	defer cancel()
	return i.fence(ctx)
}

// verifyClone polls clone_status until it reports Completed or Failed.
func (i *Instance) verifyClone(ctx context.Context) error {
	var last error
	for {
		rs, err := i.q.query(ctx, i.d.cloneStatusQuery)
		switch {
		case err != nil:
			last = err // still restarting
		case len(rs.rows) > 0:
			r := rs.row(len(rs.rows) - 1)
			switch r.str("state") {
			case "Completed":
				i.log.Info("mysqlctl: clone completed", "addr", i.addr)
				return nil
			case "Failed":
				return i.fail("clone", "verify", fmt.Errorf("%w: error %s: %s", ErrCloneFailed, r.str("error_no"), r.str("error_message")))
			}
			last = fmt.Errorf("clone state %q", r.str("state"))
		}
		if err := i.sleep(ctx, clonePoll); err != nil {
			return i.fail("clone", "verify", fmt.Errorf("outcome unknown (last: %v): %w", last, err))
		}
	}
}

// sessionLost reports whether err means the server closed our session.
func sessionLost(err error) bool {
	if errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) {
		return true
	}
	switch errNumber(err) {
	case errServerShutdown, errConnectionKilled, errServerGone, errServerLost:
		return true
	}
	return false
}
