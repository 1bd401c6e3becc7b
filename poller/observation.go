package poller

import (
	"context"
	"errors"
	"net"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/go-sql-driver/mysql"
)

// Sentinel errors carried (wrapped) in Observation.Err.
var (
	// ErrProbeTimeout: the probe did not finish within Config.ProbeTimeout.
	ErrProbeTimeout = errors.New("poller: probe timed out")
	// ErrProbeStuck: the site's previous probe still had not returned (its
	// Prober ignores its context), so no new probe was started.
	ErrProbeStuck = errors.New("poller: previous probe still running")
)

// ErrorClass says why a probe failed.
type ErrorClass string

// Error classes. ClassNone is the class of a successful probe.
const (
	ClassNone ErrorClass = ""
	// ClassRefused: TCP connection refused. The host answered and nothing
	// listens on the port: mysqld is seen down (or a proxy in between is).
	ClassRefused ErrorClass = "refused"
	// ClassTimeout: the probe's deadline passed (hung server, black-holed
	// link, unreachable host, overload).
	ClassTimeout ErrorClass = "timeout"
	// ClassAuth: the server rejected the account, its password or one of
	// the privileges the probe needs.
	ClassAuth ErrorClass = "auth"
	// ClassOther: any other failure (connection reset, TLS, protocol...).
	ClassOther ErrorClass = "other"
)

// authErrnos are the server errors that mean "this account may not do
// this", on MySQL and MariaDB.
var authErrnos = map[uint16]bool{
	1044: true, // ER_DBACCESS_DENIED_ERROR
	1045: true, // ER_ACCESS_DENIED_ERROR
	1129: true, // ER_HOST_IS_BLOCKED
	1130: true, // ER_HOST_NOT_PRIVILEGED
	1142: true, // ER_TABLEACCESS_DENIED_ERROR
	1227: true, // ER_SPECIFIC_ACCESS_DENIED_ERROR (missing privilege, e.g. REPLICA MONITOR)
	1251: true, // ER_NOT_SUPPORTED_AUTH_MODE
	1698: true, // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
	1820: true, // ER_MUST_CHANGE_PASSWORD
	1862: true, // ER_MUST_CHANGE_PASSWORD_LOGIN
	3118: true, // MySQL ER_ACCOUNT_HAS_BEEN_LOCKED
	4151: true, // MariaDB ER_ACCOUNT_HAS_BEEN_LOCKED
}

// serverErrno matches the "Error 1045 (28000): ..." text of a server error
// whose type was lost (mysqlctl replaces an error whose text held a secret).
var serverErrno = regexp.MustCompile(`\bError (\d{4,5})\b`)

// Classify returns the class of a probe error (ClassNone for nil).
func Classify(err error) ErrorClass {
	if err == nil {
		return ClassNone
	}
	var ne net.Error
	switch {
	case errors.Is(err, ErrProbeTimeout), errors.Is(err, ErrProbeStuck),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return ClassTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassRefused
	case errors.Is(err, mysql.ErrNativePassword), errors.Is(err, mysql.ErrOldPassword),
		errors.Is(err, mysql.ErrCleartextPassword), errors.Is(err, mysql.ErrUnknownPlugin):
		return ClassAuth
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		if authErrnos[me.Number] {
			return ClassAuth
		}
		return ClassOther
	}
	if m := serverErrno.FindStringSubmatch(err.Error()); m != nil {
		if n, convErr := strconv.ParseUint(m[1], 10, 16); convErr == nil && authErrnos[uint16(n)] {
			return ClassAuth
		}
	}
	return ClassOther
}

// Observation is the immutable result of one probe of one site. Consumers
// must not modify it (Status holds pointers and sets shared by copies).
type Observation struct {
	// Group and Site name what was probed.
	Group, Site string
	// Seq numbers the site's probes from 1; a later probe has a larger Seq.
	Seq uint64
	// Started and At are when the probe started and completed (or timed
	// out), on the daemon's injected clock; Duration is At - Started.
	Started, At time.Time
	Duration    time.Duration
	// Reachable: the probe returned a status. Otherwise Class and Err say
	// why not, and every field below is zero.
	Reachable bool
	// Class is ClassNone when Reachable.
	Class ErrorClass
	// Err is the probe's error, naming the step (dial or status).
	Err error
	// Status is the server's state as read by mysqlctl.
	Status mysqlctl.Status
	// SourceAddr is the replica's configured source "host:port" as the
	// server reports it; "" when it is not a replica.
	SourceAddr string
	// Follows names the site SourceAddr maps to; "" when not a replica or
	// when no site (or more than one) has that address.
	Follows string
	// IOConnected: the IO (receiver) thread is connected to its source
	// (Slave_IO_Running / Replica_IO_Running = Yes).
	IOConnected bool
	// ReplicationBroken: the IO thread stopped with an error, or the SQL
	// thread stopped with an error. An IO thread that keeps reconnecting
	// (Connecting) is not broken, it is lost.
	ReplicationBroken bool
	// SilenceKnown: the replica gives a heartbeat signal, so SilentFor and
	// SourceSilent mean something (see the package doc).
	SilenceKnown bool
	// SilentFor is how long, on the daemon's clock, neither the received
	// heartbeat count nor the received GTID position changed across probes.
	SilentFor time.Duration
	// SilenceThreshold is the threshold SilentFor was compared with.
	SilenceThreshold time.Duration
	// SourceSilent: SilenceKnown and SilentFor > SilenceThreshold.
	SourceSilent bool
}

// Writable reports whether the site answered and accepts writes
// (read_only=OFF; MySQL's super_read_only=ON implies read_only=ON).
func (o Observation) Writable() bool { return o.Reachable && !o.Status.ReadOnly }

// Probe converts the observation for statemachine.Machine.Observe.
func (o Observation) Probe() statemachine.Probe {
	return statemachine.Probe{Reachable: o.Reachable, Writable: o.Writable(), At: o.At}
}
