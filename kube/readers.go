package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/failoverd/failoverd/configs"
)

// Names failoverd writes on the objects that follow the reader set.
const (
	// LabelReader (value: the group) marks the pods of the eligible
	// readers; the reader Service selects it.
	LabelReader = "failoverd.io/reader"
	// AnnotationReadersAt records, on a reader object, when the reader set it
	// was last set from was computed (RFC 3339, nanoseconds): within one
	// epoch a set is newer than another when it was computed later.
	AnnotationReadersAt = "failoverd.io/readers-at"
	// ReaderServiceFollowerName and the dns package's reader follower name
	// the reader followers in status and metrics.
	ReaderServiceFollowerName = "kube-reader-service"
)

// ErrStaleReaderSet means a reader object records a newer reader set of the
// same epoch than the one being followed: another daemon (or a later run)
// already routed a newer set, and an older one must not undo it.
var ErrStaleReaderSet = errors.New("object records a newer reader set")

// ReaderSet is what the reader followers route: the sites of a group
// eligible to serve reads at one moment.
type ReaderSet struct {
	// Group is the group's name.
	Group string
	// Epoch is the epoch of the view the set was computed under.
	Epoch uint64
	// Sites are the eligible sites, sorted (empty: no readers).
	Sites []string
	// At is when the set was computed (its last change): it orders sets
	// within an epoch.
	At time.Time
}

// Has reports whether site is in the set.
func (s ReaderSet) Has(site string) bool { return slices.Contains(s.Sites, site) }

// Newer reports whether s should replace old: a higher epoch, or the same
// epoch computed later.
func (s ReaderSet) Newer(old ReaderSet) bool {
	return s.Epoch > old.Epoch || (s.Epoch == old.Epoch && s.At.After(old.At))
}

func (s ReaderSet) at() string { return s.At.UTC().Format(time.RFC3339Nano) }

// GuardReaders checks the epoch and reader-set time recorded in a reader
// object's annotations against s: ErrStaleEpoch when it records a newer
// epoch, ErrStaleReaderSet when it records the same epoch and a later set.
// Missing or unparsable values count as none recorded.
func GuardReaders(what string, annotations map[string]string, s ReaderSet) error {
	raw := annotations[AnnotationEpoch]
	if raw == "" {
		return nil
	}
	recorded, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		// Garbage written by hand records no epoch (as for the writer).
		return nil
	}
	// A daemon of an older epoch must not undo a newer daemon's readers.
	if recorded > s.Epoch {
		return fmt.Errorf("%s records epoch %d, reader set has %d: %w", what, recorded, s.Epoch, ErrStaleEpoch)
	}
	at, err := time.Parse(time.RFC3339Nano, annotations[AnnotationReadersAt])
	// An older reader set (a retry, a deposed leader's last write) must not
	// put back a replica a newer set took out.
	if err == nil && recorded == s.Epoch && at.After(s.At) {
		return fmt.Errorf("%s records the reader set of %s, following one of %s: %w", what, at.UTC().Format(time.RFC3339Nano), s.at(), ErrStaleReaderSet)
	}
	return nil
}

// StampReaders sets LabelGroup, AnnotationEpoch and AnnotationReadersAt for
// s on the given maps (allocating nil ones) and returns them.
func StampReaders(lbls, annotations map[string]string, s ReaderSet) (map[string]string, map[string]string) {
	if lbls == nil {
		lbls = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	lbls[LabelGroup] = s.Group
	annotations[AnnotationEpoch] = strconv.FormatUint(s.Epoch, 10)
	annotations[AnnotationReadersAt] = s.at()
	return lbls, annotations
}

// StampedReaders reports whether labels and annotations carry StampReaders' values.
func StampedReaders(lbls, annotations map[string]string, s ReaderSet) bool {
	return lbls[LabelGroup] == s.Group && annotations[AnnotationEpoch] == strconv.FormatUint(s.Epoch, 10) &&
		annotations[AnnotationReadersAt] == s.at()
}

// readerPlace is one (cluster, namespace) holding sites' pods, and so one
// reader Service.
type readerPlace struct {
	cluster, namespace string
	sites              []configs.Site // placed here with a podSelector
}

// ReaderServiceFollower makes the reader Service of every (cluster,
// namespace) among the sites' kubernetes placements reach exactly the
// eligible sites: the Service's selector is {LabelReader: group}, and the
// pods matching each site's podSelector carry that label while the site is
// in the reader set and lose it otherwise. Kubernetes then keeps the
// Service's endpoints on the pods' current addresses and readiness.
//
// Each pod is stamped with AnnotationEpoch and AnnotationReadersAt; a pod
// recording a newer set is left alone (ErrStaleEpoch, ErrStaleReaderSet).
// Services are never created. A nil *ReaderServiceFollower follows nothing.
type ReaderServiceFollower struct {
	group    configs.Group
	service  string
	clusters *Clusters
	log      *slog.Logger
	places   []readerPlace
}

// NewReaderServiceFollower returns the reader Service follower of g, or nil
// when g has no readers.kubernetes or no site with a podSelector.
func NewReaderServiceFollower(g configs.Group, c *Clusters, log *slog.Logger) *ReaderServiceFollower {
	if g.Readers.Kubernetes == nil || !g.Readers.Enabled {
		return nil
	}
	f := &ReaderServiceFollower{group: g, service: g.Readers.Kubernetes.Service, clusters: clustersOrEmpty(c), log: discardIfNil(log)}
	for _, s := range g.Sites {
		p := s.Kubernetes
		if p == nil || len(p.PodSelector) == 0 {
			continue
		}
		i := slices.IndexFunc(f.places, func(r readerPlace) bool { return r.cluster == p.Cluster && r.namespace == p.Namespace })
		if i < 0 {
			f.places = append(f.places, readerPlace{cluster: p.Cluster, namespace: p.Namespace})
			i = len(f.places) - 1
		}
		f.places[i].sites = append(f.places[i].sites, s)
	}
	if len(f.places) == 0 {
		return nil
	}
	return f
}

// Name implements the daemon's ReaderFollower: "kube-reader-service".
func (f *ReaderServiceFollower) Name() string { return ReaderServiceFollowerName }

// FollowReaders sets every reader Service's selector and every site's pods'
// LabelReader for s, and returns what it changed (empty when everything
// matched s). It goes on past a cluster, Service or pod it cannot set and
// returns every failure joined.
func (f *ReaderServiceFollower) FollowReaders(ctx context.Context, s ReaderSet) ([]string, error) {
	if f == nil {
		return nil, nil
	}
	// A set of another group must never relabel this group's pods.
	if s.Group != f.group.Name {
		return nil, fmt.Errorf("follow readers of group %q in group %q: %w", s.Group, f.group.Name, ErrWrongGroup)
	}
	var changed []string
	var errs []error
	for _, p := range f.places {
		c, err := f.place(ctx, p, s)
		changed = append(changed, c...)
		if err != nil {
			errs = append(errs, fmt.Errorf("readers in %s/%s: %w", p.cluster, p.namespace, err))
		}
	}
	return changed, errors.Join(errs...)
}

func (f *ReaderServiceFollower) place(ctx context.Context, p readerPlace, s ReaderSet) ([]string, error) {
	client, err := f.clusters.Client(p.cluster)
	if err != nil {
		return nil, err
	}
	var changed []string
	var errs []error
	// Pods first: a Service selecting the label before any pod carries it
	// has no endpoints, never wrong ones.
	pods := client.CoreV1().Pods(p.namespace)
	for _, site := range p.sites {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(site.Kubernetes.PodSelector).String()})
		if err != nil {
			errs = append(errs, fmt.Errorf("list pods of site %s: %w", site.Name, err))
			continue
		}
		reader := s.Has(site.Name)
		for _, pod := range list.Items {
			what := fmt.Sprintf("pod %s/%s/%s", p.cluster, p.namespace, pod.Name)
			did, err := f.setPod(ctx, p, pod.Name, what, reader, s)
			if did != "" {
				changed = append(changed, did)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("set %s: %w", what, err))
			}
		}
	}
	did, err := f.setService(ctx, p, s)
	if did != "" {
		changed = append(changed, did)
	}
	if err != nil {
		errs = append(errs, err)
	}
	return changed, errors.Join(errs...)
}

// setPod gives pod name LabelReader when reader, removes it otherwise, and
// stamps it with s. It updates with the resourceVersion read (a concurrent
// writer makes it read and check again), and only labels and annotations:
// an apply would not remove a label another manager (kubectl label) set.
func (f *ReaderServiceFollower) setPod(ctx context.Context, p readerPlace, name, what string, reader bool, s ReaderSet) (string, error) {
	client, _ := f.clusters.Client(p.cluster)
	pods := client.CoreV1().Pods(p.namespace)
	var did string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		if err := CheckOwner(what, pod.Labels, f.group.Name); err != nil {
			return err
		}
		if err := GuardReaders(what, pod.Annotations, s); err != nil {
			return err
		}
		_, has := pod.Labels[LabelReader]
		right := (reader && pod.Labels[LabelReader] == f.group.Name) || (!reader && !has)
		if right && StampedReaders(pod.Labels, pod.Annotations, s) {
			return nil
		}
		pod.Labels, pod.Annotations = StampReaders(pod.Labels, pod.Annotations, s)
		if reader {
			pod.Labels[LabelReader] = f.group.Name
		} else {
			delete(pod.Labels, LabelReader)
		}
		if _, err := pods.Update(ctx, pod, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		did = what + " stamp"
		if !right {
			did = fmt.Sprintf("%s reader %v -> %v", what, has, reader)
			f.log.Info("kube.reader.pod_set", "cluster", p.cluster, "namespace", p.namespace, "pod", name,
				"reader", reader, "epoch", s.Epoch, "readers", s.Sites)
		}
		return nil
	})
	return did, err
}

// setService makes the reader Service select LabelReader=group, with server-side
// apply as FieldManager naming only the selector and LabelGroup.
func (f *ReaderServiceFollower) setService(ctx context.Context, p readerPlace, s ReaderSet) (string, error) {
	client, _ := f.clusters.Client(p.cluster)
	services := client.CoreV1().Services(p.namespace)
	r := serviceRef{p.cluster, p.namespace, f.service}
	want := map[string]string{LabelReader: f.group.Name}
	var did string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := services.Get(ctx, f.service, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get %s: %w", r, err)
		}
		if err := CheckOwner(r.String(), svc.Labels, f.group.Name); err != nil {
			return err
		}
		if maps.Equal(svc.Spec.Selector, want) && svc.Labels[LabelGroup] == f.group.Name {
			return nil
		}
		// The resourceVersion read above is a precondition: a concurrent
		// writer makes the apply fail with a conflict, and the owner is
		// checked again.
		apply := corev1ac.Service(f.service, p.namespace).
			WithResourceVersion(svc.ResourceVersion).
			WithLabels(map[string]string{LabelGroup: f.group.Name}).
			WithSpec(corev1ac.ServiceSpec().WithSelector(want))
		if _, err := services.Apply(ctx, apply, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply %s: %w", r, err)
		}
		did = fmt.Sprintf("%s selector %v -> %v", r, svc.Spec.Selector, want)
		f.log.Info("kube.reader.service_set", "cluster", p.cluster, "namespace", p.namespace, "service", f.service,
			"selector", want, "previous", svc.Spec.Selector)
		return nil
	})
	return did, err
}
