package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// File keeps every group's state in one JSON file, replaced atomically: the
// new content is written to a temporary file in the same directory, fsynced,
// renamed over the old one, and the directory is fsynced. A crash at any
// moment leaves either the old or the new document, never a torn one.
type File struct {
	path string
	now  func() time.Time

	mu  sync.Mutex
	doc *document // nil until read
}

// OpenFile opens the state file at path, creating its directory if needed.
// A missing file is an empty state; an unreadable or corrupt one is an error
// that names the file and how to recover.
func OpenFile(path string, now func() time.Time) (*File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("open state file %s: %w", path, err)
	}
	f := &File{path: path, now: now}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read(); err != nil {
		return nil, err
	}
	return f, nil
}

// Describe implements Store.
func (f *File) Describe() string { return "file " + f.path }

func (f *File) read() error {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		f.doc = &document{Version: SchemaVersion, Groups: map[string]*GroupState{}}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read state file %s: %w", f.path, err)
	}
	doc := &document{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(doc); err != nil {
		return f.corrupt(err)
	}
	if err := doc.check("state file " + f.path); err != nil {
		if errors.Is(err, ErrCorrupt) {
			return f.corrupt(err)
		}
		return err
	}
	if doc.Groups == nil {
		doc.Groups = map[string]*GroupState{}
	}
	f.doc = doc
	return nil
}

func (f *File) corrupt(err error) error {
	return fmt.Errorf("state file %s: %w: %v; failoverd will not guess the epoch or an in-flight failover: "+
		"restore the file from a backup, or check every site by hand (exactly one writable) and move the file aside "+
		"to start from an empty state", f.path, ErrCorrupt, err)
}

// Load implements Store.
func (f *File) Load(_ context.Context, group string) (GroupState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.doc.Groups[group]
	if !ok {
		return GroupState{Group: group}, nil
	}
	out := *snapshot(*g)
	out.Exists = true
	return out, nil
}

// Save implements Store.
func (f *File) Save(ctx context.Context, st GroupState) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("save group %s: %w", st.Group, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Single process, one lock: the stored state compared here is always the
	// current revision, so only the epoch and in-flight rules apply.
	if err := checkWrite(f.doc.Groups[st.Group], st); err != nil {
		return err
	}
	st.UpdatedAt = f.now()
	st.Exists = false
	next := &document{Version: SchemaVersion, Groups: make(map[string]*GroupState, len(f.doc.Groups)+1)}
	for k, v := range f.doc.Groups {
		next.Groups[k] = v
	}
	next.Groups[st.Group] = snapshot(st)
	b, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return fmt.Errorf("save group %s: encode: %w", st.Group, err)
	}
	if err := writeAtomic(f.path, append(b, '\n')); err != nil {
		return fmt.Errorf("save group %s: %w", st.Group, err)
	}
	f.doc = next
	return nil
}

// writeAtomic replaces path with data so that a crash leaves the old or the
// new content, never a mix.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("fsync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Chmod(tmp.Name(), 0o640); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename into %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}
