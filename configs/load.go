package configs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by every error that reports configuration problems.
var ErrInvalid = errors.New("invalid configuration")

// EnvPrefix prefixes environment overrides: FAILOVERD_DAEMON_LISTEN overrides
// daemon.listen.
const EnvPrefix = "FAILOVERD"

// Problem is one thing wrong with a configuration: where it is, the YAML
// path, and what to do about it.
type Problem struct {
	// File is the configuration file ("" for Parse).
	File string
	// Line and Column locate the problem in File (1-based; 0 when unknown).
	// A missing key is located at the section that should hold it.
	Line, Column int
	// Env is the environment variable that set the faulty value, when one
	// did (then File, Line and Column are empty).
	Env string
	// Path is the YAML path, e.g. groups[0].sites[1].mysql.address; empty
	// for a problem of the whole file (syntax, empty file).
	Path string
	// Message says what is wrong and how to fix it.
	Message string
}

// String is "file:line:col: path: message", e.g.
// "failoverd.yaml:12:5: groups[0].sites[1].mysql.address: ...", or
// "FAILOVERD_DAEMON_LISTEN: daemon.listen: ..." for an environment value.
func (p Problem) String() string {
	var parts []string
	switch {
	case p.Env != "":
		parts = append(parts, "environment "+p.Env)
	case p.Line > 0:
		loc := strconv.Itoa(p.Line)
		if p.Column > 0 {
			loc += ":" + strconv.Itoa(p.Column)
		}
		if p.File != "" {
			loc = p.File + ":" + loc
		} else {
			loc = "line " + loc
		}
		parts = append(parts, loc)
	case p.File != "":
		parts = append(parts, p.File)
	}
	if p.Path != "" {
		parts = append(parts, p.Path)
	}
	return strings.Join(append(parts, p.Message), ": ")
}

// Problems is every problem found in a configuration. As an error it lists
// them all, one per line, in file order.
type Problems struct {
	List []Problem
}

func (p *Problems) add(path, format string, args ...any) {
	p.List = append(p.List, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (p *Problems) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d configuration problem(s):", len(p.List))
	for _, pr := range p.List {
		b.WriteString("\n  ")
		b.WriteString(pr.String())
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (p *Problems) Unwrap() error { return ErrInvalid }

// err returns p as an error, or nil when there is no problem.
func (p *Problems) err() error {
	if len(p.List) == 0 {
		return nil
	}
	return p
}

// Place returns p located where its path is in the file c was loaded from
// (file:line:col, or the environment variable that set it), as Validate
// places its own problems. For checks made outside this package on a loaded
// configuration (package preflight).
func (c *Config) Place(p Problem) Problem {
	c.src.place(&p)
	return p
}

// Problems returns list, each problem placed (see Place), in file order and
// without repeats, as a *Problems error wrapping ErrInvalid; nil when list
// is empty.
func (c *Config) Problems(list []Problem) error {
	out := &Problems{}
	for _, p := range list {
		out.List = append(out.List, c.Place(p))
	}
	out.sort()
	return out.err()
}

// sort orders the problems by position in the file (those without one, such
// as environment values and missing sections, last), and drops repeats (a
// mapping merged in twice is decoded twice).
func (p *Problems) sort() {
	sort.SliceStable(p.List, func(i, j int) bool {
		a, b := p.List[i], p.List[j]
		if (a.Line == 0) != (b.Line == 0) {
			return b.Line == 0
		}
		return a.Line < b.Line || (a.Line == b.Line && a.Column < b.Column)
	})
	seen := map[Problem]bool{}
	out := p.List[:0]
	for _, pr := range p.List {
		if !seen[pr] {
			seen[pr] = true
			out = append(out, pr)
		}
	}
	p.List = out
}

// Load reads the YAML file at path, applies environment overrides for the
// daemon section and the defaults, and validates the result. On any problem
// it returns a *Problems error (wrapping ErrInvalid) listing all of them,
// each with its file:line:col.
//
// Every scalar key of the daemon section can be overridden by the
// environment variable EnvName(path), e.g. FAILOVERD_DAEMON_LISTEN for
// daemon.listen or FAILOVERD_DAEMON_STATESTORE_PATH for
// daemon.stateStore.path; an empty variable is no override.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return load(data, path, filepath.Dir(path), os.LookupEnv)
}

// Parse is Load for YAML held in memory (no environment overrides, and
// problems carry line:col without a file name); relative file paths are
// taken relative to dir.
func Parse(yaml, dir string) (*Config, error) {
	return load([]byte(yaml), "", dir, nil)
}

func load(data []byte, file, dir string, lookupEnv func(string) (string, bool)) (*Config, error) {
	return loadChecked(data, file, dir, lookupEnv, (*Config).Validate)
}

// loadChecked decodes data (problems of the whole file: syntax, unknown
// keys, wrong types) and checks the result with check: Validate for the
// daemon, ValidateSidecar for a sidecar.
func loadChecked(data []byte, file, dir string, lookupEnv func(string) (string, bool), check func(*Config) error) (*Config, error) {
	root, problems := document(data, file)
	if problems != nil {
		return nil, problems
	}
	d := newDecoder(file, lookupEnv)
	sum := sha256.Sum256(data)
	cfg := &Config{src: d.src, digest: hex.EncodeToString(sum[:])}
	d.decodeStruct(root, reflect.ValueOf(cfg).Elem(), "")
	cfg.resolvePaths(dir)
	all := &Problems{List: d.problems}
	// Validate even when decoding found problems: a wrong type at one key
	// must not hide the problems elsewhere.
	var vp *Problems
	if errors.As(check(cfg), &vp) {
		all.List = append(all.List, vp.List...)
	}
	all.sort()
	if err := all.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}
