// Package kube connects failoverd to the Kubernetes clusters named in its
// configuration (kubeconfig + context, or in-cluster) and holds the clients
// the state store, leader election and routing executors use.
package kube

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/failoverd/failoverd/configs"
)

// ErrUnknownCluster means a cluster name is not in the configuration.
var ErrUnknownCluster = errors.New("unknown cluster")

// requestTimeout bounds every API call that carries no deadline of its own.
const requestTimeout = 10 * time.Second

// RESTConfig builds the client configuration of one cluster.
func RESTConfig(c configs.Cluster) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if c.InCluster {
		cfg, err = rest.InClusterConfig()
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if c.Kubeconfig != "" {
			rules.ExplicitPath = c.Kubeconfig
		}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context}).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %s: client config: %w", c.Name, err)
	}
	cfg.Timeout = requestTimeout
	cfg.UserAgent = "failoverd"
	return cfg, nil
}

// Clusters lazily connects to the configured clusters.
type Clusters struct {
	defs map[string]configs.Cluster

	mu      sync.Mutex
	clients map[string]kubernetes.Interface
	dynamic map[string]dynamic.Interface
}

// New returns the clusters of the configuration; nothing is dialled yet.
func New(defs []configs.Cluster) *Clusters {
	m := make(map[string]configs.Cluster, len(defs))
	for _, d := range defs {
		m[d.Name] = d
	}
	return &Clusters{defs: m, clients: map[string]kubernetes.Interface{}, dynamic: map[string]dynamic.Interface{}}
}

// Client returns the typed client of the named cluster.
func (c *Clusters) Client(name string) (kubernetes.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[name]; ok {
		return cl, nil
	}
	cfg, err := c.restConfig(name)
	if err != nil {
		return nil, err
	}
	cl, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	c.clients[name] = cl
	return cl, nil
}

// Dynamic returns the dynamic client of the named cluster (for CRDs such as
// external-dns DNSEndpoints).
func (c *Clusters) Dynamic(name string) (dynamic.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.dynamic[name]; ok {
		return cl, nil
	}
	cfg, err := c.restConfig(name)
	if err != nil {
		return nil, err
	}
	cl, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	c.dynamic[name] = cl
	return cl, nil
}

func (c *Clusters) restConfig(name string) (*rest.Config, error) {
	def, ok := c.defs[name]
	if !ok {
		return nil, fmt.Errorf("cluster %q: %w", name, ErrUnknownCluster)
	}
	return RESTConfig(def)
}
