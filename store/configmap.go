package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
//
// With leader election, a new leader Claims the next term before acting:
// from then on every Load and Save of the previous leader fails with
// ErrNotLeader (see Claim).
//
// Every Save is a compare-and-swap: the store remembers, per group, the
// resourceVersion and the state it last Loaded or Saved (the caller's base),
// and updates the object with that resourceVersion. When the API server
// refuses the update (a second daemon that wrongly believes it leads wrote in
// between), Save returns an error wrapping ErrConflict, refreshes its copy of
// the object and never retries the write on a changed state: the caller must
// Load and decide again.
type ConfigMap struct {
	client    kubernetes.Interface
	namespace string
	name      string
	now       func() time.Time

	mu     sync.Mutex        // held across API calls: writes of one object are serial anyway
	latest *corev1.ConfigMap // newest object read or written; nil when absent or not read yet
	bases  map[string]cmBase // per group: what the caller last Loaded or Saved
	fenced bool              // a term was ever claimed (leader election): Saves need one
	term   uint64            // the term this process claimed and holds; 0: none
	holder string            // who claimed it (for messages)
}

// TermAnnotation is the ConfigMap annotation holding the leadership term
// that last claimed it, "<term> <holder>": the ConfigMap store's fencing
// token (see Claim).
const TermAnnotation = "failoverd.io/leader-term"

// cmBase is what a group's caller last Loaded or Saved: its next Save is
// only allowed over exactly that.
type cmBase struct {
	rv      string      // resourceVersion it was read from or written as; "" when the object was absent
	present bool        // the group's key existed
	raw     string      // the key's content
	state   *GroupState // decoded; nil when the key was absent
}

// NewConfigMap returns a store backed by namespace/name (created on the first
// save when missing).
func NewConfigMap(client kubernetes.Interface, namespace, name string, now func() time.Time) *ConfigMap {
	return &ConfigMap{client: client, namespace: namespace, name: name, now: now, bases: map[string]cmBase{}}
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

// key returns the group's raw key in cm and whether it exists.
func key(cm *corev1.ConfigMap, group string) (string, bool) {
	if cm == nil {
		return "", false
	}
	raw, ok := cm.Data[group+configMapKeySuffix]
	return raw, ok
}

func rvOf(cm *corev1.ConfigMap) string {
	if cm == nil {
		return ""
	}
	return cm.ResourceVersion
}

func (c *ConfigMap) decode(cm *corev1.ConfigMap, group string) (*GroupState, error) {
	raw, ok := key(cm, group)
	if !ok {
		return nil, nil
	}
	return decodeKey([]byte(raw), group, fmt.Sprintf("%s key %s%s", c.Describe(), group, configMapKeySuffix))
}

// baseOf records cm as the group's base. Call with c.mu held.
func (c *ConfigMap) baseOf(cm *corev1.ConfigMap, group string) (cmBase, error) {
	st, err := c.decode(cm, group)
	if err != nil {
		return cmBase{}, err
	}
	raw, ok := key(cm, group)
	b := cmBase{rv: rvOf(cm), present: ok, raw: raw}
	if st != nil {
		b.state = snapshot(*st)
	}
	c.bases[group] = b
	return b, nil
}

// unchanged tells whether the group's key in cm is exactly the base's.
func (b cmBase) unchanged(cm *corev1.ConfigMap, group string) bool {
	raw, ok := key(cm, group)
	return ok == b.present && raw == b.raw
}

// Load implements Store. It always reads the API server, so a follower that
// becomes leader sees what the previous leader wrote, and the state it
// returns becomes the base of the group's next Save.
func (c *ConfigMap) Load(ctx context.Context, group string) (GroupState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cm, err := c.fetch(ctx)
	if err != nil {
		return GroupState{}, fmt.Errorf("load group %s: %w", group, err)
	}
	c.latest = cm
	if c.term != 0 {
		// A deposed leader's re-read before a step fails: it stops there.
		if err := c.holds(cm, "load", group); err != nil {
			return GroupState{}, err
		}
	}
	b, err := c.baseOf(cm, group)
	if err != nil {
		delete(c.bases, group) // no Save over a state nobody could read
		return GroupState{}, err
	}
	if b.state == nil {
		return GroupState{Group: group}, nil
	}
	st := *snapshot(*b.state)
	st.Exists = true
	return st, nil
}

// Save implements Store: a compare-and-swap over the state the caller last
// Loaded or Saved for this group (see ConfigMap).
func (c *ConfigMap) Save(ctx context.Context, st GroupState) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.bases[st.Group]
	if !ok {
		// Nothing loaded for this group yet: the write is based on what is
		// stored now, and the compare-and-swap holds it to that.
		cm, err := c.fetch(ctx)
		if err != nil {
			return fmt.Errorf("save group %s: %w", st.Group, err)
		}
		c.latest = cm
		if b, err = c.baseOf(cm, st.Group); err != nil {
			return fmt.Errorf("save group %s: %w", st.Group, err)
		}
	}
	if err := checkWrite(b.state, st); err != nil {
		return err
	}
	// Guards against overwriting a state the caller never saw: the object
	// we write on must still hold this group's base.
	on := c.latest
	if c.fenced {
		// Guards against a deposed leader's write: the object written on
		// (the update's resourceVersion precondition) carries our term.
		if err := c.holds(on, "save", st.Group); err != nil {
			return err
		}
	}
	if rvOf(on) != b.rv && !b.unchanged(on, st.Group) {
		return c.conflict(st.Group, on, errors.New("the stored state changed since it was loaded"))
	}
	st.UpdatedAt = c.now()
	st.Exists = false
	enc, err := encodeKey(st)
	if err != nil {
		return fmt.Errorf("save group %s: encode: %w", st.Group, err)
	}
	raw := string(enc)
	saved, err := c.write(ctx, on, st.Group, raw)
	if isConflict(on, err) {
		fresh, ferr := c.fetch(ctx)
		if ferr != nil {
			return fmt.Errorf("save group %s to %s: %w: %v; then refreshing failed: %w", st.Group, c.Describe(), ErrConflict, err, ferr)
		}
		c.latest = fresh
		if c.fenced {
			if herr := c.holds(fresh, "save", st.Group); herr != nil {
				return herr
			}
		}
		if !b.unchanged(fresh, st.Group) {
			return c.conflict(st.Group, fresh, err)
		}
		// Retry once: the object changed, but this group's key is exactly
		// the base the caller decided on (byte for byte, so also its step,
		// promotion GTID and diverged sites, not only its epoch and in-flight
		// ID): another group's key moved the resourceVersion. Writing over the
		// fresh object is then the same compare-and-swap on this group's
		// state, and it keeps the other group's new key. A second conflict
		// is returned rather than chased, so Save stays bounded.
		saved, err = c.write(ctx, fresh, st.Group, raw)
		if isConflict(fresh, err) {
			if again, ferr := c.fetch(ctx); ferr == nil {
				c.latest = again
			}
			return c.conflict(st.Group, c.latest, err)
		}
	}
	if err != nil {
		return fmt.Errorf("save group %s to %s: %w", st.Group, c.Describe(), err)
	}
	c.latest = saved
	c.bases[st.Group] = cmBase{rv: rvOf(saved), present: true, raw: raw, state: snapshot(st)}
	return nil
}

// write puts raw under the group's key of on (nil: create the object) with
// on's resourceVersion as the precondition.
func (c *ConfigMap) write(ctx context.Context, on *corev1.ConfigMap, group, raw string) (*corev1.ConfigMap, error) {
	if on == nil {
		next := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "failoverd"}},
			Data:       map[string]string{group + configMapKeySuffix: raw},
		}
		return c.client.CoreV1().ConfigMaps(c.namespace).Create(ctx, next, metav1.CreateOptions{})
	}
	next := on.DeepCopy()
	if next.Data == nil {
		next.Data = map[string]string{}
	}
	next.Data[group+configMapKeySuffix] = raw
	return c.client.CoreV1().ConfigMaps(c.namespace).Update(ctx, next, metav1.UpdateOptions{})
}

// isConflict tells whether the API server refused a write on (nil: a
// create) because the object is not the one it was based on: changed
// (Conflict), created meanwhile (AlreadyExists) or deleted meanwhile
// (NotFound on an update; on a create it means a missing namespace).
func isConflict(on *corev1.ConfigMap, err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || (on != nil && apierrors.IsNotFound(err))
}

// conflict is the ErrConflict of a refused save; now is the stored object as
// last read, named in the message so the operator sees what won.
func (c *ConfigMap) conflict(group string, now *corev1.ConfigMap, cause error) error {
	stored := "no state"
	if st, err := c.decode(now, group); err == nil && st != nil {
		stored = fmt.Sprintf("epoch %d", st.Epoch)
	}
	return fmt.Errorf("save group %s to %s: %w (now stored: %s): %v; load the state again and decide on it", group, c.Describe(), ErrConflict, stored, cause)
}

// termOf parses cm's TermAnnotation: 0 when absent.
func termOf(cm *corev1.ConfigMap) (term uint64, holder string, err error) {
	if cm == nil || cm.Annotations[TermAnnotation] == "" {
		return 0, "", nil
	}
	v := cm.Annotations[TermAnnotation]
	n, holder, _ := strings.Cut(v, " ")
	term, err = strconv.ParseUint(n, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("annotation %s=%q: %w", TermAnnotation, v, ErrCorrupt)
	}
	return term, holder, nil
}

// holds tells (nil) whether cm carries the term this process claimed.
// Call with c.mu held.
func (c *ConfigMap) holds(cm *corev1.ConfigMap, step, group string) error {
	if c.term == 0 {
		return fmt.Errorf("%s group %s in %s: %w: this daemon holds no leadership term", step, group, c.Describe(), ErrNotLeader)
	}
	term, holder, err := termOf(cm)
	if err != nil {
		return fmt.Errorf("%s group %s in %s: %w", step, group, c.Describe(), err)
	}
	if term != c.term {
		return fmt.Errorf("%s group %s in %s: %w: term %d (%s) claimed it after our term %d (%s)",
			step, group, c.Describe(), ErrNotLeader, term, holder, c.term, c.holder)
	}
	return nil
}

// claimAttempts bounds Claim's retries on a write that raced another.
const claimAttempts = 5

// Claim makes this process the writer of the ConfigMap for a new
// leadership term: it reads the stored term, checks that valid (this
// daemon's Lease has not passed) still holds after the read, and writes term
// + 1 with the read's resourceVersion as the precondition. Claims are thus
// ordered like the Leases themselves: a claim read after another daemon
// took the Lease fails valid, and one whose read preceded a newer claim
// fails the precondition. Every later Load and Save of an older term fails
// with ErrNotLeader, whether or not anyone wrote its group since. Claim
// returns the term; EndTerm ends it.
func (c *ConfigMap) Claim(ctx context.Context, holder string, valid func() bool) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fenced = true
	c.term = 0
	var err error
	for range claimAttempts {
		var cm *corev1.ConfigMap
		if cm, err = c.fetch(ctx); err != nil {
			return 0, fmt.Errorf("claim %s: %w", c.Describe(), err)
		}
		stored, _, terr := termOf(cm)
		if terr != nil {
			return 0, fmt.Errorf("claim %s: %w", c.Describe(), terr)
		}
		if !valid() {
			return 0, fmt.Errorf("claim %s: %w: the Lease may have passed to another daemon before the claim", c.Describe(), ErrNotLeader)
		}
		next := stored + 1
		var saved *corev1.ConfigMap
		saved, err = c.writeTerm(ctx, cm, fmt.Sprintf("%d %s", next, holder))
		if err == nil {
			c.latest, c.term, c.holder = saved, next, holder
			return next, nil
		}
		if !isConflict(cm, err) {
			return 0, fmt.Errorf("claim %s: %w", c.Describe(), err)
		}
	}
	return 0, fmt.Errorf("claim %s: %w: %d attempts raced other writes: %v", c.Describe(), ErrConflict, claimAttempts, err)
}

// EndTerm ends term (if it is still the one held): Saves fail from now on.
func (c *ConfigMap) EndTerm(term uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.term == term {
		c.term = 0
	}
}

// writeTerm puts the term annotation on on (nil: create the object) with
// on's resourceVersion as the precondition.
func (c *ConfigMap) writeTerm(ctx context.Context, on *corev1.ConfigMap, value string) (*corev1.ConfigMap, error) {
	if on == nil {
		next := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "failoverd"}, Annotations: map[string]string{TermAnnotation: value}}}
		return c.client.CoreV1().ConfigMaps(c.namespace).Create(ctx, next, metav1.CreateOptions{})
	}
	next := on.DeepCopy()
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[TermAnnotation] = value
	return c.client.CoreV1().ConfigMaps(c.namespace).Update(ctx, next, metav1.UpdateOptions{})
}
