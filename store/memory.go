package store

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Memory keeps every group's state in memory, encoded as the etcd store
// encodes a key, under the same write rules as the durable stores: what a
// Load returns is what a durable store would return after a restart. For
// tests and the deterministic simulation; a process restart loses it.
type Memory struct {
	now func() time.Time

	mu     sync.Mutex
	groups map[string][]byte
}

// NewMemory is an empty Memory store whose records are stamped by now.
func NewMemory(now func() time.Time) *Memory {
	return &Memory{now: now, groups: map[string][]byte{}}
}

// Describe implements Store.
func (m *Memory) Describe() string { return "memory" }

// Load implements Store.
func (m *Memory) Load(ctx context.Context, group string) (GroupState, error) {
	if err := ctx.Err(); err != nil {
		return GroupState{}, fmt.Errorf("load group %s: %w", group, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.load(group)
}

func (m *Memory) load(group string) (GroupState, error) {
	raw, ok := m.groups[group]
	if !ok {
		return GroupState{Group: group}, nil
	}
	st, err := decodeKey(raw, group, "memory store")
	if err != nil {
		return GroupState{}, err
	}
	st.Exists = true
	return *st, nil
}

// Save implements Store.
func (m *Memory) Save(ctx context.Context, st GroupState) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("save group %s: %w", st.Group, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var stored *GroupState
	if _, ok := m.groups[st.Group]; ok {
		cur, err := m.load(st.Group)
		if err != nil {
			return fmt.Errorf("save group %s: %w", st.Group, err)
		}
		stored = &cur
	}
	if err := checkWrite(stored, st); err != nil {
		return err
	}
	st.UpdatedAt = m.now()
	st.Exists = false
	raw, err := encodeKey(st)
	if err != nil {
		return fmt.Errorf("save group %s: encode: %w", st.Group, err)
	}
	m.groups[st.Group] = raw
	return nil
}
