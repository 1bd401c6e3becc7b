package kube

// Routing followers: the Kubernetes objects that follow a group's primary.
// This file holds what ServiceFollower, TaintFollower and the dns package
// share: the names failoverd writes on objects, the epoch guard and the
// sentinel errors. See docs/routing.md.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/view"
)

// Names failoverd writes on the objects it routes.
const (
	// AnnotationEpoch records, on a Service or DNSEndpoint, the epoch of the
	// view it was last set from.
	AnnotationEpoch = "failoverd.io/epoch"
	// AnnotationActiveSite records the active site of that view.
	AnnotationActiveSite = "failoverd.io/active-site"
	// LabelGroup names the group owning a Service or DNSEndpoint.
	LabelGroup = "failoverd.io/group"
	// NoPrimarySelectorKey is the only key of the selector a Service gets
	// while the active site is not placed on it (value: the group); no pod
	// carries it, so the Service has no endpoints.
	NoPrimarySelectorKey = "failoverd.io/no-primary-in-this-site"
	// TaintStandby is the key of the NoSchedule taint (value: the group) on
	// the nodes of a group's non-active sites.
	TaintStandby = "failoverd.io/standby"
	// NodeEpochAnnotationPrefix + group is the Node annotation recording the
	// epoch of the view the node's taint was last set from (nodes can be
	// shared by several groups, hence one annotation per group).
	NodeEpochAnnotationPrefix = "epoch.failoverd.io/"
	// FieldManager is the field manager failoverd writes as (server-side
	// apply of Services, updates of Nodes and DNSEndpoints).
	FieldManager = "failoverd"
)

// Sentinel errors of the routing followers.
var (
	// ErrStaleEpoch means the object records a newer epoch than the view
	// being followed: a newer failover already routed it, and a stale daemon
	// must not undo that.
	ErrStaleEpoch = errors.New("object records a newer epoch than the view")
	// ErrEpochConflict means the object records the view's epoch with another
	// active site: two daemons issued the same epoch, which only a human can
	// sort out.
	ErrEpochConflict = errors.New("object records the same epoch with another active site")
	// ErrOtherGroup means the object is labelled as owned by another group
	// (two groups configured on the same Service or DNSEndpoint).
	ErrOtherGroup = errors.New("object belongs to another group")
	// ErrWrongGroup means the view followed is not of the follower's group.
	ErrWrongGroup = errors.New("view is of another group")
	// ErrUnknownSite means the view's active site is not a site of the group.
	ErrUnknownSite = errors.New("active site is not in the group")
)

// Unreachable reports whether err means a server did not answer (refused or
// reset connection, timeout, 503, throttling) rather than refused the change:
// the routing status calls such a follower "unreachable", not "error".
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	return apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsUnexpectedServerError(err)
}

// Follower is the shape of daemon.Follower (Go interfaces are structural, so
// every value here satisfies it without this package importing daemon).
type Follower interface {
	// Name identifies the follower in logs and status.
	Name() string
	// Follow makes what the follower manages point at v.ActiveSite.
	Follow(ctx context.Context, v view.View) error
	// Reconcile is Follow that also returns what it had to change (empty
	// when everything already matched v): the daemon re-runs it on an
	// interval and reports a change as a repaired drift.
	Reconcile(ctx context.Context, v view.View) ([]string, error)
}

// Followers returns the Kubernetes followers the group's configuration asks
// for, in the order they should run: the Service follower when a site has a
// kubernetes.service, the taint follower when a site has a
// kubernetes.nodeSelector. It is empty for a group without Kubernetes
// placements. (The DNSEndpoint follower lives in package dns.)
func Followers(g configs.Group, c *Clusters, log *slog.Logger) []Follower {
	var out []Follower
	if f := NewServiceFollower(g, c, log); f != nil {
		out = append(out, f)
	}
	if f := NewTaintFollower(g, c, log); f != nil {
		out = append(out, f)
	}
	return out
}

// FromClients returns Clusters serving the given clients by cluster name
// (fakes in tests, or clients built elsewhere); a name absent from both maps
// yields ErrUnknownCluster.
func FromClients(typed map[string]kubernetes.Interface, dyn map[string]dynamic.Interface) *Clusters {
	c := New(nil)
	for n, cl := range typed {
		c.clients[n] = cl
	}
	for n, cl := range dyn {
		c.dynamic[n] = cl
	}
	return c
}

// CheckView verifies that v is a view of group g naming one of its sites and
// returns that site.
func CheckView(g configs.Group, v view.View) (configs.Site, error) {
	// A view of another group must never move this group's routing.
	if v.Group != g.Name {
		return configs.Site{}, fmt.Errorf("follow view of group %q in group %q: %w", v.Group, g.Name, ErrWrongGroup)
	}
	for _, s := range g.Sites {
		if s.Name == v.ActiveSite {
			return s, nil
		}
	}
	// An empty or unknown active site would route traffic nowhere or taint
	// every site.
	return configs.Site{}, fmt.Errorf("follow group %s epoch %d: site %q: %w", g.Name, v.Epoch, v.ActiveSite, ErrUnknownSite)
}

// GuardEpoch checks the epoch and active site recorded in an object's
// annotations (AnnotationEpoch, AnnotationActiveSite) against v. It returns
// ErrStaleEpoch when the object records a newer epoch, ErrEpochConflict when
// it records v's epoch with another site, nil otherwise. A missing or
// unparsable epoch counts as none recorded. what names the object in errors.
func GuardEpoch(what string, annotations map[string]string, v view.View) error {
	return guardEpoch(what, annotations[AnnotationEpoch], annotations[AnnotationActiveSite], true, v)
}

// guardEpoch is GuardEpoch on raw values; checkSite is false where no active
// site is recorded (Nodes).
func guardEpoch(what, rawEpoch, site string, checkSite bool, v view.View) error {
	if rawEpoch == "" {
		return nil
	}
	recorded, err := strconv.ParseUint(rawEpoch, 10, 64)
	if err != nil {
		// Garbage written by hand records no epoch; refusing would block
		// routing until a human noticed.
		return nil
	}
	// A stale daemon must not undo a newer failover.
	if recorded > v.Epoch {
		return fmt.Errorf("%s records epoch %d, view has %d: %w", what, recorded, v.Epoch, ErrStaleEpoch)
	}
	// Two daemons issuing one epoch for different sites must not flap routing.
	if checkSite && recorded == v.Epoch && site != "" && site != v.ActiveSite {
		return fmt.Errorf("%s records epoch %d for site %s, view names %s: %w", what, recorded, site, v.ActiveSite, ErrEpochConflict)
	}
	return nil
}

// CheckOwner returns ErrOtherGroup when labels name a group other than
// group in LabelGroup; an unlabelled object is adopted.
func CheckOwner(what string, labels map[string]string, group string) error {
	// Two groups configured on one object must not overwrite each other.
	if owner, ok := labels[LabelGroup]; ok && owner != group {
		return fmt.Errorf("%s is owned by group %q, not %q: %w", what, owner, group, ErrOtherGroup)
	}
	return nil
}

// Stamp sets LabelGroup, AnnotationEpoch and AnnotationActiveSite for v on
// the given maps (allocating nil ones) and returns them.
func Stamp(labels, annotations map[string]string, v view.View) (map[string]string, map[string]string) {
	if labels == nil {
		labels = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	labels[LabelGroup] = v.Group
	annotations[AnnotationEpoch] = strconv.FormatUint(v.Epoch, 10)
	annotations[AnnotationActiveSite] = v.ActiveSite
	return labels, annotations
}

// Stamped reports whether labels and annotations already carry Stamp's values.
func Stamped(labels, annotations map[string]string, v view.View) bool {
	return labels[LabelGroup] == v.Group &&
		annotations[AnnotationEpoch] == strconv.FormatUint(v.Epoch, 10) &&
		annotations[AnnotationActiveSite] == v.ActiveSite
}

func discardIfNil(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

func clustersOrEmpty(c *Clusters) *Clusters {
	if c == nil {
		return New(nil)
	}
	return c
}
