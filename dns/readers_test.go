package dns

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynfake "k8s.io/client-go/dynamic/fake"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/kube"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func readerSet(epoch uint64, at time.Duration, sites ...string) kube.ReaderSet {
	return kube.ReaderSet{Group: "orders", Epoch: epoch, Sites: sites, At: t0.Add(at)}
}

func newReaderFake() (*ReaderFollower, *dynfake.FakeDynamicClient) {
	fc := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{EndpointGVR: "DNSEndpointList"})
	fc.PrependReactor("patch", "dnsendpoints", fakeApply(fc))
	g := testGroup()
	g.Readers = configs.Readers{Enabled: true, DNS: &configs.ReaderDNS{EndpointName: "orders-readers", Hostname: "orders-ro.db.example.com"}}
	return NewReaderFollower(g, kube.FromClients(nil, map[string]dynamic.Interface{"a": fc}), nil), fc
}

func getReaders(t *testing.T, fc dynamic.Interface) *unstructured.Unstructured {
	t.Helper()
	u, err := fc.Resource(EndpointGVR).Namespace("dns").Get(context.Background(), "orders-readers", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get reader DNSEndpoint: %v", err)
	}
	return u
}

// TestReaderFollowerListsOneTargetPerEligibleReader guards the reader
// record: created with one target per eligible site that has a dns.target
// (dr has none), sorted, the writer's type and TTL; no endpoint at all when
// the set is empty (external-dns removes the record).
func TestReaderFollowerListsOneTargetPerEligibleReader(t *testing.T) {
	f, fc := newReaderFake()
	ctx := context.Background()
	changed, err := f.FollowReaders(ctx, readerSet(3, 0, "dr", "east", "west"))
	if err != nil || len(changed) != 1 || changed[0] != "dnsendpoint a/dns/orders-readers created" {
		t.Fatalf("changed %v err %v", changed, err)
	}
	u := getReaders(t, fc)
	want := `[{"dnsName":"orders-ro.db.example.com","recordTTL":30,"recordType":"A","targets":["10.0.0.1","10.0.1.1"]}]`
	if got := endpoints(t, u); got != want {
		t.Fatalf("endpoints %s\nwant %s", got, want)
	}
	if u.GetLabels()[kube.LabelGroup] != "orders" || u.GetAnnotations()[kube.AnnotationEpoch] != "3" {
		t.Fatalf("stamp %v %v", u.GetLabels(), u.GetAnnotations())
	}
	changed, err = f.FollowReaders(ctx, readerSet(3, time.Second, "west"))
	if err != nil || len(changed) != 1 || changed[0] != "dnsendpoint a/dns/orders-readers targets [10.0.0.1 10.0.1.1] -> [10.0.1.1]" {
		t.Fatalf("changed %v err %v", changed, err)
	}
	if _, err := f.FollowReaders(ctx, readerSet(3, 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := endpoints(t, getReaders(t, fc)); got != `[]` {
		t.Fatalf("endpoints %s with no reader, want none", got)
	}
	// An apiserver that returns the empty list as absent is not drift.
	u = getReaders(t, fc)
	delete(u.Object["spec"].(map[string]any), "endpoints")
	if _, err := fc.Resource(EndpointGVR).Namespace("dns").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if changed, err := f.FollowReaders(ctx, readerSet(3, 2*time.Second)); err != nil || len(changed) != 0 {
		t.Fatalf("empty set read back without endpoints: changed %v err %v, want nothing", changed, err)
	}
}

// TestReaderFollowerNeverAppliesAnOlderSet guards the epoch guard of the
// reader record: an older set of the same epoch, or a set of an older
// epoch, is refused and leaves the record as the newer set made it.
func TestReaderFollowerNeverAppliesAnOlderSet(t *testing.T) {
	f, fc := newReaderFake()
	ctx := context.Background()
	if _, err := f.FollowReaders(ctx, readerSet(5, 10*time.Second, "west")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.FollowReaders(ctx, readerSet(5, time.Second, "east", "west")); !errors.Is(err, kube.ErrStaleReaderSet) {
		t.Fatalf("older set: %v, want ErrStaleReaderSet", err)
	}
	if _, err := f.FollowReaders(ctx, readerSet(4, time.Hour, "east")); !errors.Is(err, kube.ErrStaleEpoch) {
		t.Fatalf("older epoch: %v, want ErrStaleEpoch", err)
	}
	if got := endpoints(t, getReaders(t, fc)); got != `[{"dnsName":"orders-ro.db.example.com","recordTTL":30,"recordType":"A","targets":["10.0.1.1"]}]` {
		t.Fatalf("record moved by an older set: %s", got)
	}
}

// TestReaderFollowerRepairsDrift guards drift repair of the reader record:
// a target added by hand is reported and removed by a re-run of the same
// set, and a clean re-run writes nothing.
func TestReaderFollowerRepairsDrift(t *testing.T) {
	f, fc := newReaderFake()
	ctx := context.Background()
	set := readerSet(2, 0, "east")
	if _, err := f.FollowReaders(ctx, set); err != nil {
		t.Fatal(err)
	}
	before := writes(fc)
	if changed, err := f.FollowReaders(ctx, set); err != nil || len(changed) != 0 || writes(fc) != before {
		t.Fatalf("clean re-run: changed %v err %v", changed, err)
	}
	u := getReaders(t, fc)
	u.Object["spec"] = ReaderSpec(*testGroup().DNS, "orders-ro.db.example.com", []string{"10.0.0.1", "192.0.2.66"})
	if _, err := fc.Resource(EndpointGVR).Namespace("dns").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	changed, err := f.FollowReaders(ctx, set)
	if err != nil || len(changed) != 1 || changed[0] != "dnsendpoint a/dns/orders-readers targets [10.0.0.1 192.0.2.66] -> [10.0.0.1]" {
		t.Fatalf("after a hand edit: changed %v err %v", changed, err)
	}
}

// TestReaderFollowerOnlyWhenConfigured guards that a group without
// readers.dns gets no reader DNS follower, and a nil one does nothing.
func TestReaderFollowerOnlyWhenConfigured(t *testing.T) {
	if f := NewReaderFollower(testGroup(), nil, nil); f != nil {
		t.Fatal("follower without readers.dns")
	}
	var none *ReaderFollower
	if changed, err := none.FollowReaders(context.Background(), readerSet(1, 0, "east")); err != nil || changed != nil {
		t.Fatal(changed, err)
	}
}
