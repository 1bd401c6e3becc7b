package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// DNSEndpointGVR is external-dns' DNSEndpoint resource, whose CRD StartKube installs.
var DNSEndpointGVR = schema.GroupVersionResource{Group: "externaldns.k8s.io", Version: "v1alpha1", Resource: "dnsendpoints"}

// ExternalDNSVersion is the sigs.k8s.io/external-dns module version whose
// DNSEndpoint CRD is installed (scripts/deps puts it in the module cache).
const ExternalDNSVersion = "v0.22.0"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// KubeOptions configures StartKube.
type KubeOptions struct {
	// Name is the cluster, user and context name in the kubeconfig; default
	// "kube<N>", unique in this process.
	Name string
	// ExtraArgs are appended to the kube-apiserver command line.
	ExtraArgs []string
}

// Kube is one kube-apiserver (with its etcd) started by StartKube or StartKubes.
type Kube struct {
	Name       string
	Kubeconfig string       // path of a kubeconfig holding only this cluster
	Context    string       // its context name (= Name)
	RESTConfig *rest.Config // admin (system:masters) config; copy it before changing it
	Server     string       // "https://127.0.0.1:PORT"
	Token      string       // admin bearer token

	dir   string
	certs *kubeCerts
	args  []string
	port  int
	log   string

	mu   sync.Mutex
	proc *process
}

var kubeNames atomic.Int64

// BinDir is where scripts/deps caches etcd and kube-apiserver: CacheDir()/bin.
func BinDir() string { return filepath.Join(CacheDir(), "bin") }

func kubeBinary(name string) (string, error) {
	p := filepath.Join(BinDir(), name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found in %s: run scripts/deps", name, BinDir())
	}
	return p, nil
}

// DNSEndpointCRDPath returns the DNSEndpoint CRD file inside the
// external-dns module in the Go module cache.
func DNSEndpointCRDPath() (string, error) {
	var caches []string
	if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		caches = append(caches, strings.TrimSpace(string(out)))
	}
	if c := os.Getenv("GOMODCACHE"); c != "" {
		caches = append(caches, c)
	}
	if home, err := os.UserHomeDir(); err == nil {
		caches = append(caches, filepath.Join(home, "go", "pkg", "mod"))
	}
	for _, c := range caches {
		p := filepath.Join(c, "sigs.k8s.io", "external-dns@"+ExternalDNSVersion, "config", "crd", "standard", "dnsendpoints.externaldns.k8s.io.yaml")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("DNSEndpoint CRD of sigs.k8s.io/external-dns@%s not in the module cache (%v): run scripts/deps", ExternalDNSVersion, caches)
}

// etcdServer is one etcd, possibly shared by several apiservers.
type etcdServer struct {
	url  string
	dir  string
	proc *process
}

func startEtcd(t T) (*etcdServer, error) {
	bin, err := kubeBinary("etcd")
	if err != nil {
		return nil, err
	}
	dir, err := newRunDir()
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	e := &etcdServer{dir: dir}
	t.Cleanup(func() { removeDirOnceStopped(dir, e.proc) })
	log := filepath.Join(dir, "etcd.log")
	for attempt := 1; ; attempt++ {
		cport, err := pickPort()
		if err != nil {
			return nil, err
		}
		pport, err := pickPort()
		if err != nil {
			return nil, err
		}
		e.url = fmt.Sprintf("http://127.0.0.1:%d", cport)
		peer := fmt.Sprintf("http://127.0.0.1:%d", pport)
		_ = os.RemoveAll(filepath.Join(dir, "data"))
		_ = os.Truncate(log, 0)
		p, err := startProcess("etcd", log, bin,
			"--name=testenv", "--data-dir="+filepath.Join(dir, "data"),
			"--listen-client-urls="+e.url, "--advertise-client-urls="+e.url,
			"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
			"--initial-cluster=testenv="+peer, "--unsafe-no-fsync", "--log-level=warn")
		if err != nil {
			return nil, fmt.Errorf("start etcd: %w", err)
		}
		e.proc = p
		err = waitHTTP(context.Background(), p, 30*time.Second, func(ctx context.Context) error {
			return httpGetContains(ctx, http.DefaultClient, e.url+"/health", "", `"health":"true"`)
		})
		if err == nil {
			return e, nil
		}
		_ = p.cleanup()
		tail := tailFile(log, 20)
		if !isPortInUseLog(tail) || attempt == startAttempts {
			return nil, fmt.Errorf("start etcd: %w\n--- tail of %s ---\n%s", err, log, tail)
		}
	}
}

// StartKube starts etcd and kube-apiserver on free ports, writes a
// kubeconfig, installs the DNSEndpoint CRD and waits until it is
// Established and the "default" namespace exists. Missing binaries are a
// fatal error telling to run scripts/deps.
func StartKube(t T, opts KubeOptions) *Kube {
	t.Helper()
	skipIfShort(t)
	e, err := startEtcd(t)
	if err != nil {
		t.Fatalf("testenv: start kube: %v", err)
	}
	k, err := startKube(t, e, opts, "/registry")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return k
}

// StartKubes starts n independent clusters in parallel. They share one etcd
// (each apiserver under its own --etcd-prefix) to save memory; each has its
// own apiserver, certificates, token and kubeconfig.
func StartKubes(t T, n int) []*Kube {
	t.Helper()
	skipIfShort(t)
	e, err := startEtcd(t)
	if err != nil {
		t.Fatalf("testenv: start kubes: %v", err)
	}
	kubes := make([]*Kube, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			kubes[i], errs[i] = startKube(t, e, KubeOptions{}, fmt.Sprintf("/registry-%d", i))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("testenv: start kubes: %v", err)
	}
	return kubes
}

func startKube(t T, e *etcdServer, opts KubeOptions, prefix string) (*Kube, error) {
	if _, err := kubeBinary("kube-apiserver"); err != nil {
		return nil, fmt.Errorf("start kube: %w", err)
	}
	crd, err := DNSEndpointCRDPath()
	if err != nil {
		return nil, fmt.Errorf("start kube: %w", err)
	}
	if opts.Name == "" {
		opts.Name = fmt.Sprintf("kube%d", kubeNames.Add(1)-1)
	}
	dir, err := newRunDir()
	if err != nil {
		return nil, fmt.Errorf("start kube %s: %w", opts.Name, err)
	}
	k := &Kube{Name: opts.Name, Context: opts.Name, dir: dir, log: filepath.Join(dir, "kube-apiserver.log")}
	t.Cleanup(k.cleanup)
	if k.certs, err = writeKubeCerts(dir); err != nil {
		return nil, fmt.Errorf("start kube %s: %w", opts.Name, err)
	}
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	k.Token = hex.EncodeToString(tok[:])
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(k.Token+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return nil, fmt.Errorf("start kube %s: %w", opts.Name, err)
	}
	for attempt := 1; ; attempt++ {
		if k.port, err = pickPort(); err != nil {
			return nil, fmt.Errorf("start kube %s: %w", opts.Name, err)
		}
		k.Server = fmt.Sprintf("https://127.0.0.1:%d", k.port)
		k.args = append([]string{
			"--etcd-servers=" + e.url,
			"--etcd-prefix=" + prefix,
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", k.port),
			"--advertise-address=127.0.0.1",
			"--cert-dir=" + filepath.Join(dir, "certs"),
			"--tls-cert-file=" + k.certs.servingCert,
			"--tls-private-key-file=" + k.certs.servingKey,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + k.certs.saPublic,
			"--service-account-signing-key-file=" + k.certs.saPriv,
			"--token-auth-file=" + tokens,
			"--authorization-mode=RBAC",
			"--service-cluster-ip-range=10.96.0.0/16",
			"--endpoint-reconciler-type=none",
			"--profiling=false",
		}, opts.ExtraArgs...)
		err = k.start(context.Background())
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			return nil, fmt.Errorf("start kube %s: %w", opts.Name, err)
		}
	}
	k.RESTConfig = &rest.Config{
		Host:            k.Server,
		BearerToken:     k.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: k.certs.caPEM},
		QPS:             100,
		Burst:           200,
	}
	k.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := k.writeKubeconfig(k.Kubeconfig, k.Server); err != nil {
		return nil, fmt.Errorf("start kube %s: %w", opts.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := k.installCRD(ctx, crd); err != nil {
		return nil, fmt.Errorf("start kube %s: %w", opts.Name, err)
	}
	if err := k.waitDefaultNamespace(ctx); err != nil {
		return nil, fmt.Errorf("start kube %s: %w", opts.Name, err)
	}
	return k, nil
}

func (k *Kube) start(ctx context.Context) error {
	bin, err := kubeBinary("kube-apiserver")
	if err != nil {
		return err
	}
	_ = os.Truncate(k.log, 0)
	p, err := startProcess("kube-apiserver "+k.Name, k.log, bin, k.args...)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.proc = p
	k.mu.Unlock()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(k.certs.caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	err = waitHTTP(ctx, p, 90*time.Second, func(ctx context.Context) error {
		return httpGetContains(ctx, client, k.Server+"/readyz", k.Token, "ok")
	})
	if err != nil {
		_ = p.cleanup()
		tail := tailFile(k.log, 30)
		if isPortInUseLog(tail) {
			return fmt.Errorf("%w: port %d", errPortTaken, k.port)
		}
		return fmt.Errorf("kube-apiserver on port %d: %w\n--- tail of %s ---\n%s", k.port, err, k.log, tail)
	}
	return nil
}

// waitHTTP polls check until it succeeds, the process exits or timeout.
func waitHTTP(ctx context.Context, p *process, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	for {
		if !p.running() {
			return fmt.Errorf("exited before it was ready: %s", p.exitDescription())
		}
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		lastErr = check(cctx)
		ccancel()
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last error: %v)", ctx.Err(), lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func httpGetContains(ctx context.Context, c *http.Client, url, token, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(want)) {
		return fmt.Errorf("GET %s: %s: %.300s", url, resp.Status, body)
	}
	return nil
}

// installCRD creates the CRDs in path and waits until each is Established
// and its resource can be listed.
func (k *Kube) installCRD(ctx context.Context, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("install CRD: %w", err)
	}
	dyn, err := dynamic.NewForConfig(k.RESTConfig)
	if err != nil {
		return fmt.Errorf("install CRD: %w", err)
	}
	for _, doc := range strings.Split(string(raw), "\n---") {
		if strings.TrimSpace(strings.Trim(doc, "-")) == "" {
			continue
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return fmt.Errorf("install CRD %s: %w", path, err)
		}
		obj := &unstructured.Unstructured{}
		if err := json.Unmarshal(js, &obj.Object); err != nil {
			return fmt.Errorf("install CRD %s: %w", path, err)
		}
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("install CRD %s: %w", obj.GetName(), err)
		}
		if err := waitCRDEstablished(ctx, dyn, obj.GetName()); err != nil {
			return err
		}
	}
	// Established can precede the moment the new endpoint serves requests.
	for {
		_, err := dyn.Resource(DNSEndpointGVR).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("install CRD: list %s: %w", DNSEndpointGVR.Resource, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func waitCRDEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	for {
		obj, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not Established: %w (last error %v)", name, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (k *Kube) waitDefaultNamespace(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(k.RESTConfig)
	if err != nil {
		return err
	}
	for {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace default: %w (last error %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (k *Kube) kubeconfigFor(server string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[k.Name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: k.certs.caPEM}
	cfg.AuthInfos[k.Name] = &clientcmdapi.AuthInfo{Token: k.Token}
	cfg.Contexts[k.Context] = &clientcmdapi.Context{Cluster: k.Name, AuthInfo: k.Name}
	cfg.CurrentContext = k.Context
	return cfg
}

func (k *Kube) writeKubeconfig(path, server string) error {
	if err := clientcmd.WriteToFile(*k.kubeconfigFor(server), path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// KubeconfigVia writes a kubeconfig (same context name) that reaches this
// apiserver through addr, e.g. a Proxy's Addr() (the serving certificate is
// valid for 127.0.0.1 on any port), and returns its path.
func (k *Kube) KubeconfigVia(t T, addr string) string {
	t.Helper()
	f, err := os.CreateTemp(k.dir, "kubeconfig-via-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	_ = f.Close()
	if err := k.writeKubeconfig(f.Name(), "https://"+addr); err != nil {
		t.Fatalf("testenv: %s: %v", k.Name, err)
	}
	return f.Name()
}

// MergedKubeconfig writes one kubeconfig holding every cluster's context
// (current context: the first) into t.TempDir() and returns its path.
func MergedKubeconfig(t T, kubes ...*Kube) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for i, k := range kubes {
		one := k.kubeconfigFor(k.Server)
		cfg.Clusters[k.Name] = one.Clusters[k.Name]
		cfg.AuthInfos[k.Name] = one.AuthInfos[k.Name]
		cfg.Contexts[k.Context] = one.Contexts[k.Context]
		if i == 0 {
			cfg.CurrentContext = k.Context
		}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("testenv: write merged kubeconfig: %v", err)
	}
	return path
}

// Addr returns the apiserver's "127.0.0.1:PORT".
func (k *Kube) Addr() string { return fmt.Sprintf("127.0.0.1:%d", k.port) }

// Clientset returns a typed admin client.
func (k *Kube) Clientset(t T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(k.RESTConfig))
	if err != nil {
		t.Fatalf("testenv: %s: clientset: %v", k.Name, err)
	}
	return cs
}

// Dynamic returns a dynamic admin client (use DNSEndpointGVR for DNSEndpoints).
func (k *Kube) Dynamic(t T) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(rest.CopyConfig(k.RESTConfig))
	if err != nil {
		t.Fatalf("testenv: %s: dynamic client: %v", k.Name, err)
	}
	return d
}

func (k *Kube) current() *process {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.proc
}

func (k *Kube) cleanup() { removeDirOnceStopped(k.dir, k.current()) }

// Stop sends SIGTERM to kube-apiserver (etcd keeps running) and waits.
func (k *Kube) Stop() error { return k.current().terminate(30 * time.Second) }

// Kill sends SIGKILL to kube-apiserver and waits.
func (k *Kube) Kill() error { return k.current().kill() }

// Pause sends SIGSTOP to kube-apiserver.
func (k *Kube) Pause() error { return k.current().pause() }

// Resume sends SIGCONT to kube-apiserver.
func (k *Kube) Resume() error { return k.current().resume() }

// Running reports whether kube-apiserver runs.
func (k *Kube) Running() bool { return k.current().running() }

// Restart stops kube-apiserver if it runs and starts it again on the same
// port, certificates and etcd data; it returns once /readyz says ok.
func (k *Kube) Restart(ctx context.Context) error {
	if p := k.current(); p.running() {
		if err := p.terminate(30 * time.Second); err != nil && !errors.Is(err, ErrNotRunning) {
			return fmt.Errorf("restart %s: %w", k.Name, err)
		}
	}
	if err := k.start(ctx); err != nil {
		return fmt.Errorf("restart %s: %w", k.Name, err)
	}
	return nil
}
