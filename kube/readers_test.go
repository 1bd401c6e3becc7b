package kube

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/failoverd/failoverd/configs"
)

// readerGroup is testGroup with a third site north beside east on cluster
// a, and the reader Service mysql-read.
func readerGroup() configs.Group {
	g := testGroup()
	g.Sites = append(g.Sites, configs.Site{Name: "north", Kubernetes: &configs.Placement{Cluster: "a", Namespace: "db",
		PodSelector: map[string]string{"app": "mysql", "site": "north"}}})
	g.Readers = configs.Readers{Enabled: true, Kubernetes: &configs.ReaderService{Service: "mysql-read"}}
	return g
}

func pod(name string, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "db", Labels: lbls}}
}

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func setOf(epoch uint64, at time.Duration, sites ...string) ReaderSet {
	return ReaderSet{Group: "orders", Epoch: epoch, Sites: sites, At: t0.Add(at)}
}

// readerFixture: cluster a holds east-0, north-0 and an unrelated pod;
// cluster b holds west-0; both have the Service mysql-read.
func readerFixture() (*ReaderServiceFollower, *fakeClusterPair) {
	a := []runtime.Object{
		pod("east-0", map[string]string{"app": "mysql", "site": "east"}),
		pod("north-0", map[string]string{"app": "mysql", "site": "north"}),
		pod("web-0", map[string]string{"app": "web"}),
		service("mysql-read", map[string]string{"app": "mysql"}, nil),
	}
	b := []runtime.Object{
		pod("west-0", map[string]string{"app": "mysql", "site": "west"}),
		service("mysql-read", map[string]string{"app": "mysql"}, nil),
	}
	c, fa, fb := fakeClusters(a, b)
	return NewReaderServiceFollower(readerGroup(), c, nil), &fakeClusterPair{a: fa, b: fb}
}

type fakeClusterPair struct{ a, b kubernetes.Interface }

// readersIn returns the pods of cs labelled readers of orders, sorted.
func readersIn(t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	list, err := cs.CoreV1().Pods("db").List(context.Background(), metav1.ListOptions{LabelSelector: LabelReader + "=orders"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// TestReaderServiceFollowerLabelsExactlyTheEligibleSitesAcrossClusters
// guards the reader Service's membership: the pods of the eligible sites,
// in every cluster, carry the reader label the Service of their cluster
// selects; a site leaving the set loses it; other pods are never touched.
func TestReaderServiceFollowerLabelsExactlyTheEligibleSitesAcrossClusters(t *testing.T) {
	f, cs := readerFixture()
	ctx := context.Background()
	if _, err := f.FollowReaders(ctx, setOf(3, 0, "east", "west")); err != nil {
		t.Fatal(err)
	}
	if got := readersIn(t, cs.a); !slices.Equal(got, []string{"east-0"}) {
		t.Fatalf("cluster a readers %v, want [east-0]", got)
	}
	if got := readersIn(t, cs.b); !slices.Equal(got, []string{"west-0"}) {
		t.Fatalf("cluster b readers %v, want [west-0]", got)
	}
	for _, c := range []kubernetes.Interface{cs.a, cs.b} {
		if sel := getService(t, c, "mysql-read").Spec.Selector; len(sel) != 1 || sel[LabelReader] != "orders" {
			t.Fatalf("reader Service selector %v", sel)
		}
	}
	changed, err := f.FollowReaders(ctx, setOf(3, time.Second, "north", "west"))
	if err != nil {
		t.Fatal(err)
	}
	if got := readersIn(t, cs.a); !slices.Equal(got, []string{"north-0"}) {
		t.Fatalf("cluster a readers %v after east left, want [north-0]", got)
	}
	if !slices.Contains(changed, "pod a/db/east-0 reader true -> false") || !slices.Contains(changed, "pod a/db/north-0 reader false -> true") {
		t.Fatalf("changed %v", changed)
	}
	web, _ := cs.a.CoreV1().Pods("db").Get(ctx, "web-0", metav1.GetOptions{})
	if len(web.Labels) != 1 || len(web.Annotations) != 0 {
		t.Fatalf("unrelated pod touched: %v %v", web.Labels, web.Annotations)
	}
	if _, err := f.FollowReaders(ctx, setOf(4, 0)); err != nil {
		t.Fatal(err)
	}
	if a, b := readersIn(t, cs.a), readersIn(t, cs.b); len(a)+len(b) != 0 {
		t.Fatalf("readers %v %v after an empty set", a, b)
	}
}

// TestReaderServiceFollowerNeverAppliesAnOlderSet guards the epoch guard of
// the reader targets: a set of an older epoch (ErrStaleEpoch) or an older
// set of the same epoch (ErrStaleReaderSet: a retry, a deposed leader) is
// refused and puts no replica back.
func TestReaderServiceFollowerNeverAppliesAnOlderSet(t *testing.T) {
	f, cs := readerFixture()
	ctx := context.Background()
	if _, err := f.FollowReaders(ctx, setOf(5, 10*time.Second, "west")); err != nil {
		t.Fatal(err)
	}
	_, err := f.FollowReaders(ctx, setOf(5, 5*time.Second, "east", "west"))
	if !errors.Is(err, ErrStaleReaderSet) {
		t.Fatalf("older set of the same epoch: %v, want ErrStaleReaderSet", err)
	}
	_, err = f.FollowReaders(ctx, setOf(4, time.Hour, "east", "north", "west"))
	if !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("set of an older epoch: %v, want ErrStaleEpoch", err)
	}
	if got := readersIn(t, cs.a); len(got) != 0 {
		t.Fatalf("an older set relabelled %v", got)
	}
	if _, err := f.FollowReaders(ctx, setOf(5, 10*time.Second, "west")); err != nil {
		t.Fatalf("the same set again: %v", err)
	}
	if _, err := f.FollowReaders(ctx, setOf(4, 0, "west")); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("%v", err)
	}
	if _, err := f.FollowReaders(ctx, ReaderSet{Group: "other", Epoch: 9}); !errors.Is(err, ErrWrongGroup) {
		t.Fatalf("another group's set: %v, want ErrWrongGroup", err)
	}
}

// TestReaderServiceFollowerRepairsDrift guards drift repair: a pod labelled
// a reader by hand, a reader Service whose selector was edited, and a pod
// recreated without the label (a restart) are reported and put back by a
// re-run of the same set; a clean re-run writes nothing.
func TestReaderServiceFollowerRepairsDrift(t *testing.T) {
	f, cs := readerFixture()
	ctx := context.Background()
	set := setOf(2, 0, "east")
	if _, err := f.FollowReaders(ctx, set); err != nil {
		t.Fatal(err)
	}
	if changed, err := f.FollowReaders(ctx, set); err != nil || len(changed) != 0 {
		t.Fatalf("clean re-run changed %v, err %v", changed, err)
	}
	pods := cs.a.CoreV1().Pods("db")
	north, _ := pods.Get(ctx, "north-0", metav1.GetOptions{})
	north.Labels[LabelReader] = "orders"
	if _, err := pods.Update(ctx, north, metav1.UpdateOptions{FieldManager: "kubectl-label"}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "east-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, pod("east-0", map[string]string{"app": "mysql", "site": "east"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := getService(t, cs.b, "mysql-read")
	svc.Spec.Selector = map[string]string{"app": "mysql"}
	if _, err := cs.b.CoreV1().Services("db").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	changed, err := f.FollowReaders(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pod a/db/north-0 reader true -> false", "pod a/db/east-0 reader false -> true",
		"service b/db/mysql-read selector map[app:mysql] -> map[failoverd.io/reader:orders]"} {
		if !slices.Contains(changed, want) {
			t.Errorf("changed %v lacks %q", changed, want)
		}
	}
	if got := readersIn(t, cs.a); !slices.Equal(got, []string{"east-0"}) {
		t.Fatalf("readers %v after the repair, want [east-0]", got)
	}
}

// TestReaderServiceFollowerOnlyWhenConfigured guards that a group without
// readers.kubernetes (or with readers off) gets no reader follower.
func TestReaderServiceFollowerOnlyWhenConfigured(t *testing.T) {
	if f := NewReaderServiceFollower(testGroup(), nil, nil); f != nil {
		t.Fatal("follower without readers.kubernetes")
	}
	g := readerGroup()
	g.Readers.Enabled = false
	if f := NewReaderServiceFollower(g, nil, nil); f != nil {
		t.Fatal("follower with readers off")
	}
	var none *ReaderServiceFollower
	if changed, err := none.FollowReaders(context.Background(), setOf(1, 0, "east")); err != nil || changed != nil {
		t.Fatal(changed, err)
	}
}
