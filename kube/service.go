package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/view"
)

// serviceRef is one Service that sites of a group are placed on.
type serviceRef struct {
	cluster, namespace, name string
}

func (r serviceRef) String() string {
	return "service " + r.cluster + "/" + r.namespace + "/" + r.name
}

// ServiceFollower points the primary Service(s) of a group at the active
// site: for every distinct (cluster, namespace, service) among the sites'
// kubernetes placements, the Service's spec.selector becomes the active
// site's podSelector when the active site is placed on that Service, and
// {NoPrimarySelectorKey: group} (no endpoints) otherwise, so applications
// never reach a read-only replica through it. Each Service is stamped with
// LabelGroup, AnnotationEpoch and AnnotationActiveSite; a Service recording
// a newer epoch is left alone (ErrStaleEpoch). Services are never created.
//
// A nil *ServiceFollower (a group without kubernetes.service) follows
// nothing and never fails.
type ServiceFollower struct {
	group    configs.Group
	clusters *Clusters
	log      *slog.Logger
	services []serviceRef
}

// NewServiceFollower returns the Service follower of g, or nil when no site
// of g names a kubernetes.service. A nil c makes every Follow fail with
// ErrUnknownCluster; a nil log discards.
func NewServiceFollower(g configs.Group, c *Clusters, log *slog.Logger) *ServiceFollower {
	f := &ServiceFollower{group: g, clusters: clustersOrEmpty(c), log: discardIfNil(log)}
	seen := map[serviceRef]bool{}
	for _, s := range g.Sites {
		p := s.Kubernetes
		if p == nil || p.Service == "" {
			continue
		}
		r := serviceRef{p.Cluster, p.Namespace, p.Service}
		if !seen[r] {
			seen[r] = true
			f.services = append(f.services, r)
		}
	}
	if len(f.services) == 0 {
		return nil
	}
	return f
}

// Name implements the daemon's Follower: "kube-service".
func (f *ServiceFollower) Name() string { return "kube-service" }

// Follow sets every Service of the group for v (see ServiceFollower). It
// goes on past a Service it cannot set and returns every failure joined;
// errors.Is finds ErrStaleEpoch, ErrEpochConflict, ErrOtherGroup,
// ErrWrongGroup, ErrUnknownSite and ErrUnknownCluster in it.
func (f *ServiceFollower) Follow(ctx context.Context, v view.View) error {
	_, err := f.Reconcile(ctx, v)
	return err
}

// Reconcile is Follow that also returns what it had to change, one line per
// Service written (empty when every Service already matched v).
func (f *ServiceFollower) Reconcile(ctx context.Context, v view.View) ([]string, error) {
	if f == nil {
		return nil, nil
	}
	active, err := CheckView(f.group, v)
	if err != nil {
		return nil, err
	}
	var changed []string
	var errs []error
	for _, r := range f.services {
		what, err := f.set(ctx, r, f.selectorFor(r, active), v)
		if what != "" {
			changed = append(changed, what)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("set %s: %w", r, err))
		}
	}
	return changed, errors.Join(errs...)
}

// selectorFor returns the selector Service r must have while active is the
// active site.
func (f *ServiceFollower) selectorFor(r serviceRef, active configs.Site) map[string]string {
	if p := active.Kubernetes; p != nil && (serviceRef{p.Cluster, p.Namespace, p.Service}) == r && len(p.PodSelector) > 0 {
		return maps.Clone(p.PodSelector)
	}
	// An empty selector would leave the Service unmanaged (its old endpoints
	// stay), so a Service without the primary gets one matching no pod.
	return map[string]string{NoPrimarySelectorKey: f.group.Name}
}

// set makes Service r carry selector and v's stamp, and says what it
// changed ("" when the Service was up to date and not written).
//
// It writes with server-side apply as FieldManager, naming only what
// failoverd owns: spec.selector (an atomic map: failoverd owns it whole),
// LabelGroup, AnnotationEpoch and AnnotationActiveSite. Other labels,
// annotations and spec fields stay with their managers.
func (f *ServiceFollower) set(ctx context.Context, r serviceRef, selector map[string]string, v view.View) (string, error) {
	client, err := f.clusters.Client(r.cluster)
	if err != nil {
		return "", err
	}
	services := client.CoreV1().Services(r.namespace)
	var what string
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := services.Get(ctx, r.name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		if err := CheckOwner(r.String(), svc.Labels, f.group.Name); err != nil {
			return err
		}
		if err := GuardEpoch(r.String(), svc.Annotations, v); err != nil {
			return err
		}
		sameSelector := maps.Equal(svc.Spec.Selector, selector)
		if sameSelector && Stamped(svc.Labels, svc.Annotations, v) {
			return nil
		}
		old := svc.Spec.Selector
		labels, annotations := Stamp(nil, nil, v)
		// The resourceVersion read above is a precondition of the apply: a
		// concurrent writer (another daemon) makes it fail with a conflict,
		// and the epoch and owner are checked again.
		apply := corev1ac.Service(r.name, r.namespace).
			WithResourceVersion(svc.ResourceVersion).
			WithLabels(labels).
			WithAnnotations(annotations).
			WithSpec(corev1ac.ServiceSpec().WithSelector(selector))
		if _, err := services.Apply(ctx, apply, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		what = r.String() + " stamp"
		if !sameSelector {
			what = fmt.Sprintf("%s selector %v -> %v", r, old, selector)
		}
		f.log.Info("kube.service.selector_set", "cluster", r.cluster, "namespace", r.namespace,
			"service", r.name, "epoch", v.Epoch, "active_site", v.ActiveSite, "selector", selector, "previous", old)
		return nil
	})
	return what, err
}

var _ Follower = (*ServiceFollower)(nil)
