package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// configMapKeySuffix names a group's key in the ConfigMap: "<group>.json".
const configMapKeySuffix = ".json"

// ConfigMap keeps each group's state as one key of a Kubernetes ConfigMap.
// Every Save is an Update carrying the resourceVersion last read, so a
// concurrent writer (a second daemon that wrongly believes it leads) makes
// the save fail with ErrConflict instead of overwriting newer state.
type ConfigMap struct {
	client    kubernetes.Interface
	namespace string
	name      string
	now       func() time.Time

	mu     sync.Mutex
	cached *corev1.ConfigMap // last read or written; nil before the first read
}

// NewConfigMap returns a store backed by namespace/name (created on the first
// save when missing).
func NewConfigMap(client kubernetes.Interface, namespace, name string, now func() time.Time) *ConfigMap {
	return &ConfigMap{client: client, namespace: namespace, name: name, now: now}
}

// Describe implements Store.
func (c *ConfigMap) Describe() string { return "configmap " + c.namespace + "/" + c.name }

func (c *ConfigMap) fetch(ctx context.Context) (*corev1.ConfigMap, error) {
	cm, err := c.client.CoreV1().ConfigMaps(c.namespace).Get(ctx, c.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", c.Describe(), err)
	}
	return cm, nil
}

func (c *ConfigMap) decode(cm *corev1.ConfigMap, group string) (*GroupState, error) {
	if cm == nil {
		return nil, nil
	}
	raw, ok := cm.Data[group+configMapKeySuffix]
	if !ok {
		return nil, nil
	}
	var doc struct {
		Version int        `json:"version"`
		State   GroupState `json:"state"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	where := fmt.Sprintf("%s key %s%s", c.Describe(), group, configMapKeySuffix)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w: %v; restore the key from a backup, or check every site by hand and delete the key to start from an empty state", where, ErrCorrupt, err)
	}
	d := document{Version: doc.Version, Groups: map[string]*GroupState{group: &doc.State}}
	if err := d.check(where); err != nil {
		return nil, err
	}
	return &doc.State, nil
}

// Load implements Store. It always reads the API server, so a follower that
// becomes leader sees what the previous leader wrote.
func (c *ConfigMap) Load(ctx context.Context, group string) (GroupState, error) {
	cm, err := c.fetch(ctx)
	if err != nil {
		return GroupState{}, fmt.Errorf("load group %s: %w", group, err)
	}
	st, err := c.decode(cm, group)
	if err != nil {
		return GroupState{}, err
	}
	c.mu.Lock()
	c.cached = cm
	c.mu.Unlock()
	if st == nil {
		return GroupState{Group: group}, nil
	}
	st.Exists = true
	return *st, nil
}

// Save implements Store.
func (c *ConfigMap) Save(ctx context.Context, st GroupState) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cm := c.cached
	if cm == nil {
		var err error
		if cm, err = c.fetch(ctx); err != nil {
			return fmt.Errorf("save group %s: %w", st.Group, err)
		}
	}
	old, err := c.decode(cm, st.Group)
	if err != nil {
		return fmt.Errorf("save group %s: %w", st.Group, err)
	}
	if err := checkEpoch(old, st); err != nil {
		return err
	}
	st.UpdatedAt = c.now()
	st.Exists = false
	b, err := json.MarshalIndent(struct {
		Version int        `json:"version"`
		State   GroupState `json:"state"`
	}{SchemaVersion, st}, "", "  ")
	if err != nil {
		return fmt.Errorf("save group %s: encode: %w", st.Group, err)
	}
	var saved *corev1.ConfigMap
	if cm == nil {
		next := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "failoverd"}},
			Data:       map[string]string{st.Group + configMapKeySuffix: string(b)},
		}
		saved, err = c.client.CoreV1().ConfigMaps(c.namespace).Create(ctx, next, metav1.CreateOptions{})
	} else {
		next := cm.DeepCopy()
		if next.Data == nil {
			next.Data = map[string]string{}
		}
		next.Data[st.Group+configMapKeySuffix] = string(b)
		saved, err = c.client.CoreV1().ConfigMaps(c.namespace).Update(ctx, next, metav1.UpdateOptions{})
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		c.cached = nil // the next Load/Save reads the newer version
		return fmt.Errorf("save group %s to %s: %w: %v", st.Group, c.Describe(), ErrConflict, err)
	}
	if err != nil {
		return fmt.Errorf("save group %s to %s: %w", st.Group, c.Describe(), err)
	}
	c.cached = saved
	return nil
}
