package dns

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/kube"
)

// ReaderFollowerName names the reader DNSEndpoint follower in status and metrics.
const ReaderFollowerName = "dns-readers"

// ReaderFollower upserts the group's reader DNSEndpoint (readers.dns.endpointName,
// in the cluster and namespace of the group's dns section) so that its one
// record {dnsName: readers.dns.hostname, recordType and recordTTL as the
// writer's, targets: the eligible sites' dns.target, sorted} lists exactly
// the reader set. With no reader (or none with a dns.target) the spec has
// no endpoint, so external-dns removes the record and clients fail fast
// instead of reading from a replica nobody vouches for. Eligible sites
// without dns.target are left out.
//
// The object is stamped with kube.LabelGroup, kube.AnnotationEpoch and
// kube.AnnotationReadersAt; one recording a newer set is left alone
// (kube.ErrStaleEpoch, kube.ErrStaleReaderSet), one owned by another group
// too (kube.ErrOtherGroup). A nil *ReaderFollower follows nothing.
type ReaderFollower struct {
	group    configs.Group
	clusters *kube.Clusters
	log      *slog.Logger
}

// NewReaderFollower returns the reader DNS follower of g, or nil when g has
// no readers.dns (or no dns section to place it).
func NewReaderFollower(g configs.Group, c *kube.Clusters, log *slog.Logger) *ReaderFollower {
	if g.Readers.DNS == nil || g.DNS == nil || !g.Readers.Enabled {
		return nil
	}
	if c == nil {
		c = kube.New(nil)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ReaderFollower{group: g, clusters: c, log: log}
}

// Name implements the daemon's ReaderFollower: "dns-readers".
func (f *ReaderFollower) Name() string { return ReaderFollowerName }

// ReaderSpec returns the reader DNSEndpoint spec listing targets (sorted by
// the caller): one endpoint, or none when targets is empty.
func ReaderSpec(d configs.DNS, hostname string, targets []string) map[string]any {
	if len(targets) == 0 {
		return map[string]any{"endpoints": []any{}}
	}
	t := make([]any, len(targets))
	for i, s := range targets {
		t[i] = s
	}
	ep := map[string]any{"dnsName": hostname, "recordType": d.RecordType, "targets": t}
	if ttl := int64(d.TTL / time.Second); ttl > 0 {
		ep["recordTTL"] = ttl
	}
	return map[string]any{"endpoints": []any{ep}}
}

// targetsOf returns the dns.target of each site of s, sorted and distinct.
func (f *ReaderFollower) targetsOf(s kube.ReaderSet) []string {
	var out []string
	for _, site := range f.group.Sites {
		if s.Has(site.Name) && site.DNS != nil && site.DNS.Target != "" {
			out = append(out, site.DNS.Target)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// FollowReaders makes the reader DNSEndpoint list s (see ReaderFollower)
// and returns what it changed (empty when it already did).
func (f *ReaderFollower) FollowReaders(ctx context.Context, s kube.ReaderSet) ([]string, error) {
	if f == nil {
		return nil, nil
	}
	// A set of another group must never move this group's record.
	if s.Group != f.group.Name {
		return nil, fmt.Errorf("follow readers of group %q in group %q: %w", s.Group, f.group.Name, kube.ErrWrongGroup)
	}
	d, r := f.group.DNS, f.group.Readers.DNS
	what := fmt.Sprintf("dnsendpoint %s/%s/%s", d.Cluster, d.Namespace, r.EndpointName)
	client, err := f.clusters.Dynamic(d.Cluster)
	if err != nil {
		return nil, fmt.Errorf("set %s: %w", what, err)
	}
	res := client.Resource(EndpointGVR).Namespace(d.Namespace)
	want := f.targetsOf(s)
	spec := ReaderSpec(*d, r.Hostname, want)
	var changed []string
	// A concurrent creator (AlreadyExists) or writer (Conflict) makes us read
	// the object again and re-check what it records before writing.
	retriable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	err = retry.OnError(retry.DefaultRetry, retriable, func() error {
		obj, err := res.Get(ctx, r.EndpointName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if _, err := res.Create(ctx, f.object(s, spec), metav1.CreateOptions{FieldManager: kube.FieldManager}); err != nil {
				return fmt.Errorf("create: %w", err)
			}
			changed = []string{what + " created"}
			f.logSet(s, want, "created")
			return nil
		}
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		if err := kube.CheckOwner(what, obj.GetLabels(), f.group.Name); err != nil {
			return err
		}
		if err := kube.GuardReaders(what, obj.GetAnnotations(), s); err != nil {
			return err
		}
		sameSpec := sameJSON(readerSpecOf(obj), spec)
		if sameSpec && kube.StampedReaders(obj.GetLabels(), obj.GetAnnotations(), s) {
			return nil
		}
		apply := f.object(s, spec)
		// The resourceVersion read above is a precondition of the apply.
		apply.SetResourceVersion(obj.GetResourceVersion())
		if _, err := res.Apply(ctx, r.EndpointName, apply, metav1.ApplyOptions{FieldManager: kube.FieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		changed = []string{what + " stamp"}
		if !sameSpec {
			changed = []string{fmt.Sprintf("%s targets %v -> %v", what, targets(obj), want)}
			f.logSet(s, want, "updated")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("set %s: %w", what, err)
	}
	return changed, nil
}

// object is the reader DNSEndpoint failoverd wants for s: only the fields it owns.
func (f *ReaderFollower) object(s kube.ReaderSet, spec map[string]any) *unstructured.Unstructured {
	d, r := f.group.DNS, f.group.Readers.DNS
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	obj.SetAPIVersion(EndpointGVR.GroupVersion().String())
	obj.SetKind("DNSEndpoint")
	obj.SetNamespace(d.Namespace)
	obj.SetName(r.EndpointName)
	labels, annotations := kube.StampReaders(nil, nil, s)
	obj.SetLabels(labels)
	obj.SetAnnotations(annotations)
	obj.Object["spec"] = spec
	return obj
}

func (f *ReaderFollower) logSet(s kube.ReaderSet, targets []string, how string) {
	d, r := f.group.DNS, f.group.Readers.DNS
	f.log.Info("dns.readers.set", "cluster", d.Cluster, "namespace", d.Namespace, "endpoint", r.EndpointName,
		"hostname", r.Hostname, "targets", targets, "readers", s.Sites, "epoch", s.Epoch, "how", how)
}

// readerSpecOf is obj's spec with a missing or null endpoints list read as
// empty (how an apiserver may return the empty record), so an empty set
// read back is not taken for drift on every pass.
func readerSpecOf(obj *unstructured.Unstructured) any {
	spec, ok := obj.Object["spec"].(map[string]any)
	if !ok {
		return obj.Object["spec"]
	}
	if spec["endpoints"] == nil {
		spec = maps.Clone(spec)
		spec["endpoints"] = []any{}
	}
	return spec
}
