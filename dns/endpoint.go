// Package dns makes a group's DNS name follow its primary through an
// external-dns DNSEndpoint object (externaldns.k8s.io/v1alpha1), which
// external-dns turns into the record at the DNS provider. It talks to the
// apiserver with the dynamic client, so it needs no external-dns Go module.
// See docs/routing.md.
package dns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/kube"
	"github.com/failoverd/failoverd/view"
)

// EndpointGVR is external-dns' DNSEndpoint resource.
var EndpointGVR = schema.GroupVersionResource{Group: "externaldns.k8s.io", Version: "v1alpha1", Resource: "dnsendpoints"}

// Sentinel errors.
var (
	// ErrStaleEpoch is kube.ErrStaleEpoch: the DNSEndpoint records a newer
	// epoch than the view, so a newer failover already moved the record.
	ErrStaleEpoch = kube.ErrStaleEpoch
	// ErrNoTarget means the active site has no dns.target (a dr-only site
	// promoted by hand): the record is left where it was.
	ErrNoTarget = errors.New("active site has no DNS target")
)

// Follower upserts the group's DNSEndpoint so that its only endpoint is
// {dnsName: dns.hostname, recordType: dns.recordType, recordTTL: dns.ttl in
// seconds, targets: [active site's dns.target]}, labelled and annotated like
// the Service (kube.LabelGroup, kube.AnnotationEpoch,
// kube.AnnotationActiveSite). It creates the object when missing, replaces
// spec.endpoints wholesale otherwise, and leaves alone an object recording
// a newer epoch (ErrStaleEpoch) or owned by another group
// (kube.ErrOtherGroup).
//
// A nil *Follower (a group without a dns section) follows nothing and never
// fails.
type Follower struct {
	group    configs.Group
	clusters *kube.Clusters
	log      *slog.Logger
}

// NewFollower returns the DNS follower of g, or nil when g has no dns
// section. A nil c makes every Follow fail with kube.ErrUnknownCluster; a nil
// log discards.
func NewFollower(g configs.Group, c *kube.Clusters, log *slog.Logger) *Follower {
	if g.DNS == nil {
		return nil
	}
	if c == nil {
		c = kube.New(nil)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Follower{group: g, clusters: c, log: log}
}

// Name implements the daemon's Follower: "dns".
func (f *Follower) Name() string { return "dns" }

// Follow points the DNSEndpoint at v's active site (see Follower).
func (f *Follower) Follow(ctx context.Context, v view.View) error {
	_, err := f.Reconcile(ctx, v)
	return err
}

// Reconcile is Follow that also returns what it had to change (nothing when
// the DNSEndpoint already matched v).
//
// An existing DNSEndpoint is written with server-side apply as
// kube.FieldManager naming only what failoverd owns (spec, kube.LabelGroup,
// kube.AnnotationEpoch, kube.AnnotationActiveSite): other labels and
// annotations stay with their managers.
func (f *Follower) Reconcile(ctx context.Context, v view.View) ([]string, error) {
	if f == nil {
		return nil, nil
	}
	d := f.group.DNS
	active, err := kube.CheckView(f.group, v)
	if err != nil {
		return nil, err
	}
	if active.DNS == nil || active.DNS.Target == "" {
		return nil, fmt.Errorf("dns follow group %s epoch %d: site %s: %w", f.group.Name, v.Epoch, active.Name, ErrNoTarget)
	}
	what := fmt.Sprintf("dnsendpoint %s/%s/%s", d.Cluster, d.Namespace, d.EndpointName)
	client, err := f.clusters.Dynamic(d.Cluster)
	if err != nil {
		return nil, fmt.Errorf("set %s: %w", what, err)
	}
	res := client.Resource(EndpointGVR).Namespace(d.Namespace)
	spec := Spec(*d, active.DNS.Target)
	var changed []string
	// A concurrent creator (AlreadyExists) or writer (Conflict) makes us read
	// the object again and re-check its epoch before writing.
	retriable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	err = retry.OnError(retry.DefaultRetry, retriable, func() error {
		obj, err := res.Get(ctx, d.EndpointName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			obj = f.object(v, spec)
			if _, err := res.Create(ctx, obj, metav1.CreateOptions{FieldManager: kube.FieldManager}); err != nil {
				return fmt.Errorf("create: %w", err)
			}
			changed = []string{what + " created"}
			f.logSet(v, active.DNS.Target, "created")
			return nil
		}
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		if err := kube.CheckOwner(what, obj.GetLabels(), f.group.Name); err != nil {
			return err
		}
		if err := kube.GuardEpoch(what, obj.GetAnnotations(), v); err != nil {
			return err
		}
		sameSpec := sameJSON(obj.Object["spec"], spec)
		if sameSpec && kube.Stamped(obj.GetLabels(), obj.GetAnnotations(), v) {
			return nil
		}
		apply := f.object(v, spec)
		// The resourceVersion read above is a precondition of the apply, so
		// a concurrent writer makes it fail with a conflict instead of being
		// overwritten.
		apply.SetResourceVersion(obj.GetResourceVersion())
		if _, err := res.Apply(ctx, d.EndpointName, apply, metav1.ApplyOptions{FieldManager: kube.FieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		changed = []string{what + " stamp"}
		if !sameSpec {
			changed = []string{fmt.Sprintf("%s targets %v -> [%s]", what, targets(obj), active.DNS.Target)}
		}
		f.logSet(v, active.DNS.Target, "updated")
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("set %s: %w", what, err)
	}
	return changed, nil
}

// object is the DNSEndpoint failoverd wants for v: only the fields it owns.
func (f *Follower) object(v view.View, spec map[string]any) *unstructured.Unstructured {
	d := f.group.DNS
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	obj.SetAPIVersion(EndpointGVR.GroupVersion().String())
	obj.SetKind("DNSEndpoint")
	obj.SetNamespace(d.Namespace)
	obj.SetName(d.EndpointName)
	labels, annotations := kube.Stamp(nil, nil, v)
	obj.SetLabels(labels)
	obj.SetAnnotations(annotations)
	obj.Object["spec"] = spec
	return obj
}

// targets lists the targets of every endpoint of obj (for logs).
func targets(obj *unstructured.Unstructured) []string {
	var out []string
	eps, _, _ := unstructured.NestedSlice(obj.Object, "spec", "endpoints")
	for _, ep := range eps {
		if m, ok := ep.(map[string]any); ok {
			t, _, _ := unstructured.NestedStringSlice(m, "targets")
			out = append(out, t...)
		}
	}
	return out
}

func (f *Follower) logSet(v view.View, target, how string) {
	d := f.group.DNS
	f.log.Info("dns.endpoint.set", "cluster", d.Cluster, "namespace", d.Namespace,
		"endpoint", d.EndpointName, "hostname", d.Hostname, "target", target, "epoch", v.Epoch,
		"active_site", v.ActiveSite, "how", how)
}

// Spec returns the DNSEndpoint spec (unstructured) pointing d.Hostname at
// target. recordTTL is d.TTL in whole seconds, left out when below one
// second (external-dns then uses the provider's default).
func Spec(d configs.DNS, target string) map[string]any {
	ep := map[string]any{
		"dnsName":    d.Hostname,
		"recordType": d.RecordType,
		"targets":    []any{target},
	}
	if ttl := int64(d.TTL / time.Second); ttl > 0 {
		ep["recordTTL"] = ttl
	}
	return map[string]any{"endpoints": []any{ep}}
}

// sameJSON compares two unstructured values by their JSON encoding, so that
// an int64 read back from the apiserver equals the one we built.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return reflect.DeepEqual(a, b)
	}
	return string(ja) == string(jb)
}
