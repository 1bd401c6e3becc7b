package kube

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/view"
)

// Shared fixtures of the fake-client tests of the routing followers.

// testGroup has east on cluster a, west on cluster b (both Service
// db/mysql), and dr on cluster a without a Service or nodes.
func testGroup() configs.Group {
	return configs.Group{
		Name: "orders",
		Sites: []configs.Site{
			{Name: "east", Kubernetes: &configs.Placement{Cluster: "a", Namespace: "db", Service: "mysql",
				PodSelector: map[string]string{"app": "mysql", "site": "east"}, NodeSelector: map[string]string{"zone": "east"}}},
			{Name: "west", Kubernetes: &configs.Placement{Cluster: "b", Namespace: "db", Service: "mysql",
				PodSelector: map[string]string{"app": "mysql", "site": "west"}, NodeSelector: map[string]string{"zone": "west"}}},
			{Name: "dr"},
		},
	}
}

func viewOf(epoch uint64, site string) view.View {
	return view.View{Group: "orders", Epoch: epoch, ActiveSite: site}
}

func service(name string, selector map[string]string, annotations map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "db", Annotations: annotations},
		Spec:       corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Port: 3306}}},
	}
}

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

// fakeClusters returns Clusters "a" and "b" backed by fake clientsets.
func fakeClusters(a, b []runtime.Object) (*Clusters, *fake.Clientset, *fake.Clientset) {
	fa, fb := fake.NewClientset(a...), fake.NewClientset(b...)
	return FromClients(map[string]kubernetes.Interface{"a": fa, "b": fb}, nil), fa, fb
}

// writes counts the update, patch and create actions a fake recorded.
func writes(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		switch a.GetVerb() {
		case "update", "patch", "create", "delete":
			n++
		}
	}
	return n
}

// failFirstUpdates makes the first n updates of resource fail with a
// Conflict, as a concurrent writer would.
func failFirstUpdates(cs *fake.Clientset, resource string, n int) *int {
	return failFirst(cs, "update", resource, n)
}

// failFirst makes the first n actions verb ("update", "patch" for an
// apply) of resource fail with a Conflict, as a concurrent writer would.
func failFirst(cs *fake.Clientset, verb, resource string, n int) *int {
	calls := 0
	cs.PrependReactor(verb, resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls <= n {
			return true, nil, conflict(resource)
		}
		return false, nil, nil
	})
	return &calls
}

func getService(t *testing.T, cs kubernetes.Interface, name string) *corev1.Service {
	t.Helper()
	svc, err := cs.CoreV1().Services("db").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get service %s: %v", name, err)
	}
	return svc
}

func getNode(t *testing.T, cs kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return n
}

func conflict(resource string) error {
	return apierrors.NewConflict(schema.GroupResource{Resource: resource}, "object", errors.New("written concurrently"))
}
