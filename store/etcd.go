package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNotLeader means the etcd or ConfigMap store refused a Load or Save
// because this process does not hold the leadership (no token or term set,
// the election key it names is gone or was recreated, or a newer term
// claimed the ConfigMap): another daemon may lead.
var ErrNotLeader = errors.New("deposed: the leadership token no longer holds")

// Token is the fencing token of an etcd leader: the election key the
// campaign created (concurrency.Election.Key) and its create revision
// (Election.Rev). While the key exists with that create revision, the
// session that won still leads; a later leader's key has another revision.
type Token struct {
	Key string
	Rev int64
}

// IsZero tells whether t is the zero Token (not leading).
func (t Token) IsZero() bool { return t == Token{} }

// Revision is one stored revision of a group's key (see Etcd.History).
type Revision struct {
	// ModRevision is the etcd revision that wrote it.
	ModRevision int64
	// State is the state it holds.
	State GroupState
}

// Etcd keeps each group's state under its own key of an etcd cluster,
// prefix + "/groups/" + group, as {"version": SchemaVersion, "state": {...}}
// (the ConfigMap store's key document).
//
// Only the elected leader writes, fenced by its Token (SetToken): every Save
// is one transaction whose condition holds both the token (the election key
// still exists with the create revision it had when this process won) and a
// compare-and-swap on the group key's ModRevision as this process last
// Loaded or Saved it (its base). A deposed leader's delayed Save therefore
// fails as a whole in etcd itself, whatever its local clock or lease timer
// believes (ErrNotLeader), and a write over a state the caller never saw
// fails too (ErrConflict; Load again before retrying). The write rules of
// checkWrite apply to the base, as in the other stores. With a token set,
// Load checks it in the same transaction as its read, so a deposed leader's
// step check fails instead of acting on a state it may no longer own.
type Etcd struct {
	cli    *clientv3.Client
	prefix string
	now    func() time.Time

	mu    sync.Mutex
	token Token
	bases map[string]etcdBase
	locks map[string]chan struct{} // per group: one Load or Save at a time
}

// etcdBase is what a group's caller last Loaded or Saved: its next Save is
// only allowed over exactly that revision of the key.
type etcdBase struct {
	modRev int64       // the key's ModRevision; 0 when the key was absent
	state  *GroupState // decoded; nil when absent
}

// NewEtcd returns a store keeping its keys under prefix (a trailing "/" is
// dropped) through cli; clock stamps GroupState.UpdatedAt. It holds no
// token until SetToken: until then every Save returns ErrNotLeader.
func NewEtcd(cli *clientv3.Client, prefix string, clock func() time.Time) *Etcd {
	return &Etcd{
		cli: cli, prefix: strings.TrimRight(prefix, "/"), now: clock,
		bases: map[string]etcdBase{}, locks: map[string]chan struct{}{},
	}
}

// SetToken sets the leadership token every later Load and Save is fenced
// with; the zero Token means not leading (Save then returns ErrNotLeader).
func (e *Etcd) SetToken(t Token) {
	e.mu.Lock()
	e.token = t
	e.mu.Unlock()
}

func (e *Etcd) currentToken() Token {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.token
}

// Describe implements Store: "etcd <prefix> at <endpoints>".
func (e *Etcd) Describe() string {
	return "etcd " + e.prefix + " at " + strings.Join(e.cli.Endpoints(), ",")
}

// Key returns the etcd key holding group's state.
func (e *Etcd) Key(group string) string { return e.prefix + "/groups/" + group }

// lock serializes the calls on one group (its base), giving up when ctx ends.
func (e *Etcd) lock(ctx context.Context, group string) (unlock func(), err error) {
	e.mu.Lock()
	l, ok := e.locks[group]
	if !ok {
		l = make(chan struct{}, 1)
		e.locks[group] = l
	}
	e.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func tokenHolds(t Token) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(t.Key), "=", t.Rev)
}

func (e *Etcd) notLeader(step, group string, t Token) error {
	if t.IsZero() {
		return fmt.Errorf("%s group %s in %s: %w: this daemon holds no leadership token", step, group, e.Describe(), ErrNotLeader)
	}
	return fmt.Errorf("%s group %s in %s: %w (election key %s with create revision %d is gone)", step, group, e.Describe(), ErrNotLeader, t.Key, t.Rev)
}

// read reads the group's key, fenced by t unless t is zero.
func (e *Etcd) read(ctx context.Context, t Token, group string) (etcdBase, error) {
	key := e.Key(group)
	var got *clientv3.GetResponse
	if t.IsZero() {
		resp, err := e.cli.Get(ctx, key) // linearizable
		if err != nil {
			return etcdBase{}, fmt.Errorf("load group %s from %s: get %s: %w", group, e.Describe(), key, err)
		}
		got = resp
	} else {
		resp, err := e.cli.Txn(ctx).If(tokenHolds(t)).Then(clientv3.OpGet(key)).Commit()
		if err != nil {
			return etcdBase{}, fmt.Errorf("load group %s from %s: fenced get %s: %w", group, e.Describe(), key, err)
		}
		// Guards against a deposed leader acting on a state it no longer
		// owns: its step check fails here rather than after a write.
		if !resp.Succeeded {
			return etcdBase{}, e.notLeader("load", group, t)
		}
		got = (*clientv3.GetResponse)(resp.Responses[0].GetResponseRange())
	}
	if len(got.Kvs) == 0 {
		return etcdBase{}, nil
	}
	kv := got.Kvs[0]
	st, err := e.decode(kv.Value, group, kv.ModRevision)
	if err != nil {
		return etcdBase{}, err
	}
	return etcdBase{modRev: kv.ModRevision, state: snapshot(*st)}, nil
}

// decode reads one key's document, refusing a newer schema and anything
// that does not describe group.
func (e *Etcd) decode(raw []byte, group string, rev int64) (*GroupState, error) {
	return decodeKey(raw, group, fmt.Sprintf("%s key %s (revision %d)", e.Describe(), e.Key(group), rev))
}

// Load implements Store. It always reads etcd (linearizably), fenced by the
// token when one is set (ErrNotLeader when it no longer holds), and the
// state it returns becomes the base of the group's next Save.
func (e *Etcd) Load(ctx context.Context, group string) (GroupState, error) {
	unlock, err := e.lock(ctx, group)
	if err != nil {
		return GroupState{}, fmt.Errorf("load group %s from %s: %w", group, e.Describe(), err)
	}
	defer unlock()
	b, err := e.read(ctx, e.currentToken(), group)
	if err != nil {
		if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNewerSchema) {
			e.dropBase(group) // no Save over a state nobody could read
		}
		return GroupState{}, err
	}
	e.setBase(group, b)
	if b.state == nil {
		return GroupState{Group: group}, nil
	}
	st := *snapshot(*b.state)
	st.Exists = true
	return st, nil
}

func (e *Etcd) base(group string) (etcdBase, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, ok := e.bases[group]
	return b, ok
}

func (e *Etcd) setBase(group string, b etcdBase) {
	e.mu.Lock()
	e.bases[group] = b
	e.mu.Unlock()
}

func (e *Etcd) dropBase(group string) {
	e.mu.Lock()
	delete(e.bases, group)
	e.mu.Unlock()
}

// Save implements Store: one transaction, fenced by the token, that puts
// the group's key only if it is still at the caller's base (see Etcd).
func (e *Etcd) Save(ctx context.Context, st GroupState) error {
	t := e.currentToken()
	// Guards against a daemon that does not lead (or no longer knows that
	// it does) writing the state at all: only the elected leader writes.
	if t.IsZero() {
		return e.notLeader("save", st.Group, t)
	}
	unlock, err := e.lock(ctx, st.Group)
	if err != nil {
		return fmt.Errorf("save group %s to %s: %w", st.Group, e.Describe(), err)
	}
	defer unlock()
	b, ok := e.base(st.Group)
	if !ok {
		// Nothing loaded for this group yet: the write is based on what is
		// stored now, and the compare-and-swap holds it to that.
		if b, err = e.read(ctx, t, st.Group); err != nil {
			return fmt.Errorf("save group %s: %w", st.Group, err)
		}
		e.setBase(st.Group, b)
	}
	if err := checkWrite(b.state, st); err != nil {
		return err
	}
	st.UpdatedAt = e.now()
	st.Exists = false
	raw, err := encodeKey(st)
	if err != nil {
		return fmt.Errorf("save group %s: encode: %w", st.Group, err)
	}
	key := e.Key(st.Group)
	resp, err := e.cli.Txn(ctx).
		If(tokenHolds(t), clientv3.Compare(clientv3.ModRevision(key), "=", b.modRev)).
		Then(clientv3.OpPut(key, string(raw))).
		Else(clientv3.OpGet(t.Key), clientv3.OpGet(key)).
		Commit()
	if err != nil {
		// The outcome is unknown: the base stays, so if the write did
		// happen the next Save is refused (ErrConflict) rather than blind.
		return fmt.Errorf("save group %s to %s: txn on %s: %w", st.Group, e.Describe(), key, err)
	}
	if !resp.Succeeded {
		// Guards against a deposed leader's delayed write being taken for a
		// mere conflict: the token is judged first, from the same revision.
		tok := resp.Responses[0].GetResponseRange().GetKvs()
		if len(tok) == 0 || tok[0].CreateRevision != t.Rev {
			return e.notLeader("save", st.Group, t)
		}
		stored := "no state"
		if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
			stored = fmt.Sprintf("revision %d", kvs[0].ModRevision)
			if cur, err := e.decode(kvs[0].Value, st.Group, kvs[0].ModRevision); err == nil {
				stored = fmt.Sprintf("epoch %d at revision %d", cur.Epoch, kvs[0].ModRevision)
			}
		}
		// Guards against overwriting a state the caller never saw (another
		// writer got in between); the base stays, so retrying without a Load
		// is refused again.
		return fmt.Errorf("save group %s to %s: %w (based on revision %d, now stored: %s); load the state again and decide on it",
			st.Group, e.Describe(), ErrConflict, b.modRev, stored)
	}
	e.setBase(st.Group, etcdBase{modRev: resp.Header.Revision, state: snapshot(st)})
	return nil
}

// History returns every revision of the group's key still in etcd's
// history (not yet compacted), oldest first: the writes since the key was
// last created. A group never saved has none. It reads without the token:
// it is for tests and operators, not for decisions.
func (e *Etcd) History(ctx context.Context, group string) ([]Revision, error) {
	key := e.Key(group)
	resp, err := e.cli.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("history of group %s in %s: get %s: %w", group, e.Describe(), key, err)
	}
	var out []Revision
	kvs := resp.Kvs
	for len(kvs) > 0 {
		kv := kvs[0]
		st, err := e.decode(kv.Value, group, kv.ModRevision)
		if err != nil {
			return nil, fmt.Errorf("history of group %s: %w", group, err)
		}
		st.Exists = true
		out = append(out, Revision{ModRevision: kv.ModRevision, State: *st})
		if kv.Version <= 1 {
			break // the key's first write since it was created
		}
		prev, err := e.cli.Get(ctx, key, clientv3.WithRev(kv.ModRevision-1))
		if errors.Is(err, rpctypes.ErrCompacted) {
			break // older revisions are gone
		}
		if err != nil {
			return nil, fmt.Errorf("history of group %s in %s: get %s at revision %d: %w", group, e.Describe(), key, kv.ModRevision-1, err)
		}
		kvs = prev.Kvs
	}
	slices.Reverse(out)
	return out, nil
}
