package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/view"
)

// nodeSite is one site whose nodes the taint follower manages.
type nodeSite struct {
	site     string
	cluster  string
	selector labels.Selector
}

// TaintFollower keeps writers off the sites that lost: every node matching a
// non-active site's kubernetes.nodeSelector gets the taint
// TaintStandby=<group>:NoSchedule, and the active site's nodes lose it. A
// node matching both the active site and another site counts as active.
// Other taints are never touched, nor a TaintStandby taint whose value names
// another group (see docs/routing.md on nodes shared by groups). Each node
// written records v's epoch in the annotation NodeEpochAnnotationPrefix +
// group; a node recording a newer epoch is left alone (ErrStaleEpoch).
//
// A nil *TaintFollower (a group without kubernetes.nodeSelector) follows
// nothing and never fails.
type TaintFollower struct {
	group configs.Group
	// clusters gives the clients; sites are the sites with a nodeSelector.
	clusters *Clusters
	log      *slog.Logger
	sites    []nodeSite
}

// NewTaintFollower returns the taint follower of g, or nil when no site of g
// has a kubernetes.nodeSelector. A nil c makes every Follow fail with
// ErrUnknownCluster; a nil log discards.
func NewTaintFollower(g configs.Group, c *Clusters, log *slog.Logger) *TaintFollower {
	f := &TaintFollower{group: g, clusters: clustersOrEmpty(c), log: discardIfNil(log)}
	for _, s := range g.Sites {
		// An empty selector matches every node of the cluster: never taint
		// a whole cluster because a site did not say which nodes are its own.
		if s.Kubernetes == nil || len(s.Kubernetes.NodeSelector) == 0 {
			continue
		}
		f.sites = append(f.sites, nodeSite{
			site: s.Name, cluster: s.Kubernetes.Cluster,
			selector: labels.SelectorFromSet(labels.Set(maps.Clone(s.Kubernetes.NodeSelector))),
		})
	}
	if len(f.sites) == 0 {
		return nil
	}
	return f
}

// Name implements the daemon's Follower: "kube-taint".
func (f *TaintFollower) Name() string { return "kube-taint" }

// Follow taints and untaints the group's nodes for v (see TaintFollower). It
// goes on past a cluster or node it cannot set and returns every failure
// joined; errors.Is finds ErrStaleEpoch, ErrWrongGroup, ErrUnknownSite and
// ErrUnknownCluster in it.
func (f *TaintFollower) Follow(ctx context.Context, v view.View) error {
	_, err := f.Reconcile(ctx, v)
	return err
}

// Reconcile is Follow that also returns what it had to change, one line per
// node written (empty when every node already matched v).
func (f *TaintFollower) Reconcile(ctx context.Context, v view.View) ([]string, error) {
	if f == nil {
		return nil, nil
	}
	if _, err := CheckView(f.group, v); err != nil {
		return nil, err
	}
	var clusters []string
	for _, s := range f.sites {
		if !slices.Contains(clusters, s.cluster) {
			clusters = append(clusters, s.cluster)
		}
	}
	var changed []string
	var errs []error
	for _, cl := range clusters {
		what, err := f.followCluster(ctx, cl, v)
		changed = append(changed, what...)
		if err != nil {
			errs = append(errs, fmt.Errorf("taint nodes of cluster %s: %w", cl, err))
		}
	}
	return changed, errors.Join(errs...)
}

// followCluster sets the taints of the group's nodes in one cluster and
// says what it changed.
func (f *TaintFollower) followCluster(ctx context.Context, cluster string, v view.View) ([]string, error) {
	client, err := f.clusters.Client(cluster)
	if err != nil {
		return nil, err
	}
	// want: node name → whether it must carry the standby taint; listed:
	// the node as listed, so an up-to-date node costs no further request.
	want := map[string]bool{}
	listed := map[string]*corev1.Node{}
	for _, s := range f.sites {
		if s.cluster != cluster {
			continue
		}
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: s.selector.String()})
		if err != nil {
			return nil, fmt.Errorf("list nodes of site %s: %w", s.site, err)
		}
		for i := range list.Items {
			n := &list.Items[i]
			listed[n.Name] = n
			// The active site's nodes are never tainted, even when another
			// site's selector also matches them: writers must reach the primary.
			if s.site == v.ActiveSite {
				want[n.Name] = false
			} else if _, seen := want[n.Name]; !seen {
				want[n.Name] = true
			}
		}
	}
	var changed []string
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(want)) {
		what, err := f.setNode(ctx, client, listed[name], want[name], v)
		if what != "" {
			changed = append(changed, "node "+cluster+"/"+name+" "+what)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", name, err))
		}
	}
	return changed, errors.Join(errs...)
}

// setNode adds (taint) or removes (!taint) the group's standby taint on one
// node (as listed) and records v's epoch; an up-to-date node is not written.
// It says what it changed ("taint added", "taint removed", "epoch", or ""
// when nothing).
//
// Nodes are written with a conflict-checked update, not server-side apply:
// spec.taints is an atomic list, so applying it would take ownership of
// every other taint; read-modify-write keeps them as they are.
func (f *TaintFollower) setNode(ctx context.Context, client kubernetes.Interface, listed *corev1.Node, taint bool, v view.View) (string, error) {
	nodes := client.CoreV1().Nodes()
	name := listed.Name
	epochKey := NodeEpochAnnotationPrefix + f.group.Name
	epoch := strconv.FormatUint(v.Epoch, 10)
	node := listed.DeepCopy()
	fresh := true
	var what string
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if !fresh {
			// After a conflict the node changed under us: read it again.
			var err error
			if node, err = nodes.Get(ctx, name, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("get: %w", err)
			}
		}
		fresh = false
		if err := guardEpoch("node "+name, node.Annotations[epochKey], "", false, v); err != nil {
			return err
		}
		taints, changed := standbyTaints(node.Spec.Taints, f.group.Name, taint)
		if !changed && node.Annotations[epochKey] == epoch {
			return nil
		}
		node.Spec.Taints = taints
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[epochKey] = epoch
		// Update carries the resourceVersion listed or read: a concurrent change
		// of the node makes it fail with a conflict, and we start over.
		if _, err := nodes.Update(ctx, node, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		what = "epoch"
		if changed {
			msg := "kube.taint.removed"
			what = "taint removed"
			if taint {
				msg = "kube.taint.added"
				what = "taint added"
			}
			f.log.Info(msg, "node", name, "epoch", v.Epoch, "active_site", v.ActiveSite)
		}
		return nil
	})
	return what, err
}

// standbyTaints returns taints with the group's standby taint present (add)
// or absent (!add), and whether that differs from taints. Other taints keep
// their order. A standby taint of another group is left as it is: a node
// holds one taint per key and effect, and that group still needs it.
func standbyTaints(taints []corev1.Taint, group string, add bool) ([]corev1.Taint, bool) {
	i := slices.IndexFunc(taints, func(t corev1.Taint) bool {
		return t.Key == TaintStandby && t.Effect == corev1.TaintEffectNoSchedule
	})
	switch {
	case add && i < 0:
		out := slices.Clone(taints)
		return append(out, corev1.Taint{Key: TaintStandby, Value: group, Effect: corev1.TaintEffectNoSchedule}), true
	case !add && i >= 0 && taints[i].Value == group:
		return slices.Delete(slices.Clone(taints), i, i+1), true
	default:
		return taints, false
	}
}

var _ Follower = (*TaintFollower)(nil)
