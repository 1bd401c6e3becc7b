package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The decoder reads the YAML node tree itself rather than letting a library
// unmarshal it, because it must be stricter and say more than one:
//   - struct keys match a field's yaml name exactly (keys are case-sensitive);
//     a key differing only in case is an unknown key ("did you mean X?"), or,
//     when X is also there, a duplicate of it;
//   - the keys of map fields (pod selectors, node selectors) keep their case;
//   - a key repeated in one mapping is a problem naming both lines;
//   - a value of the wrong type is a problem at its position, and decoding
//     goes on, so every problem of the file is reported at once;
//   - every problem carries file:line:col and the YAML path, and every path
//     is remembered with its position so that Validate's problems get one too.
//
// Anchors, aliases and merge keys (<<) work as in YAML 1.1: explicit keys win
// over merged ones, and earlier merged mappings over later ones.

var durationType = reflect.TypeFor[time.Duration]()

// origin is where the value at a YAML path came from.
type origin struct {
	line, column int
	// env is the environment variable that set the value, when one did.
	env string
}

// source remembers where each path of a decoded Config was written, and
// which paths held a value of the wrong type.
type source struct {
	file string
	at   map[string]origin
	// broken paths held a value that could not be decoded; the problem is
	// reported there once, and Validate's checks of what lies at or under
	// them (zero values or defaults standing in) are dropped.
	broken map[string]bool
}

// place sets p's position from the source: the path's own position, else
// that of its nearest ancestor present in the file (the section a missing key
// belongs in).
func (s *source) place(p *Problem) {
	if s == nil || p.Line > 0 || p.Env != "" {
		return
	}
	p.File = s.file
	for path := p.Path; path != ""; path = parent(path) {
		if o, ok := s.at[path]; ok {
			p.Line, p.Column, p.Env = o.line, o.column, o.env
			if o.env != "" {
				p.File = ""
			}
			return
		}
	}
}

// hides reports whether path lies at or under a broken path.
func (s *source) hides(path string) bool {
	if s == nil {
		return false
	}
	for ; path != ""; path = parent(path) {
		if s.broken[path] {
			return true
		}
	}
	return false
}

// parent strips the last element of a YAML path: a.b[2] → a.b → a → "".
func parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// syntaxLine extracts the line from a YAML parser error ("yaml: line 3: ...").
var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses data as exactly one YAML document whose top level is a
// mapping, and returns that mapping.
func document(data []byte, file string) (*yaml.Node, *Problems) {
	fail := func(line int, format string, args ...any) (*yaml.Node, *Problems) {
		return nil, &Problems{List: []Problem{{File: file, Line: line, Message: fmt.Sprintf(format, args...)}}}
	}
	syntax := func(err error) (*yaml.Node, *Problems) {
		if m := syntaxLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1]) // the pattern matched digits
			return fail(line, "YAML syntax: %s", m[2])
		}
		return fail(0, "YAML syntax: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return fail(0, "the file is empty; it needs at least a groups section (see configs/examples)")
	} else if err != nil {
		return syntax(err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		// Which document would count is a guess; refuse rather than pick one.
		return fail(next.Line, "a second YAML document starts here; a config file holds one YAML document (remove the ---)")
	} else if !errors.Is(err, io.EOF) {
		return syntax(err)
	}
	root := resolve(doc.Content[0])
	switch {
	case isNull(root):
		return fail(root.Line, "the file is empty; it needs at least a groups section (see configs/examples)")
	case root.Kind != yaml.MappingNode:
		return fail(root.Line, "the top level must be a mapping of daemon, clusters and groups, got %s", describe(root))
	}
	return root, nil
}

// decoder turns a YAML node tree into a typed value. `default` tags fill in
// absent keys; problems accumulate instead of stopping the decoding.
type decoder struct {
	src      *source
	problems []Problem
	// lookupEnv, when set, reads FAILOVERD_DAEMON_* overrides.
	lookupEnv func(string) (string, bool)
	// envNodes maps the synthetic nodes of environment values to their
	// variable, so their problems name it.
	envNodes map[*yaml.Node]string
}

func newDecoder(file string, lookupEnv func(string) (string, bool)) *decoder {
	return &decoder{
		src:       &source{file: file, at: map[string]origin{}, broken: map[string]bool{}},
		lookupEnv: lookupEnv,
		envNodes:  map[*yaml.Node]string{},
	}
}

// problem records a problem at node n's position.
func (d *decoder) problem(n *yaml.Node, path, format string, args ...any) {
	p := Problem{Path: path, Message: fmt.Sprintf(format, args...)}
	switch env, ok := d.envNodes[n]; {
	case ok:
		p.Env = env
	case n != nil && n.Line > 0:
		p.File, p.Line, p.Column = d.src.file, n.Line, n.Column
	default:
		p.File = d.src.file
	}
	d.problems = append(d.problems, p)
}

// broken records a value of the wrong type at path.
func (d *decoder) broken(n *yaml.Node, path, format string, args ...any) {
	d.problem(n, path, format, args...)
	d.src.broken[path] = true
}

func (d *decoder) record(path string, n *yaml.Node) {
	if n != nil && n.Line > 0 {
		d.src.at[path] = origin{line: n.Line, column: n.Column}
	}
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	// An alias always names an anchor defined before it, so this ends.
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// entry is one key: value pair of a mapping.
type entry struct {
	key, value *yaml.Node
}

// entries lists the pairs of mapping n, merge keys expanded, reporting keys
// that are not scalars and keys repeated exactly (the first one counts).
func (d *decoder) entries(n *yaml.Node, path string) []entry {
	return d.entriesOf(n, path, map[*yaml.Node]bool{n: true})
}

// entriesOf is entries; visiting holds the mappings being expanded, n among
// them.
func (d *decoder) entriesOf(n *yaml.Node, path string, visiting map[*yaml.Node]bool) []entry {
	var explicit, merged []entry
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, d.merge(val, path, visiting)...)
			continue
		}
		if rk := resolve(k); rk.Kind != yaml.ScalarNode {
			d.problem(k, path, "a key must be a plain string, got %s", describe(rk))
			continue
		}
		key := resolve(k).Value
		if first, dup := seen[key]; dup {
			d.problem(k, join(path, key), "duplicate key: %s is written at line %d:%d and again at line %d:%d; keep one",
				key, first.Line, first.Column, k.Line, k.Column)
			continue
		}
		seen[key] = k
		explicit = append(explicit, entry{k, val})
	}
	for _, e := range merged {
		if _, ok := seen[resolve(e.key).Value]; !ok {
			seen[resolve(e.key).Value] = e.key
			explicit = append(explicit, e)
		}
	}
	return explicit
}

// merge returns the pairs that a merge key's value (a mapping, an alias of
// one, or a list of them) brings in; visiting guards against a mapping merged
// into itself.
func (d *decoder) merge(val *yaml.Node, path string, visiting map[*yaml.Node]bool) []entry {
	val = resolve(val)
	var sources []*yaml.Node
	switch val.Kind {
	case yaml.MappingNode:
		sources = []*yaml.Node{val}
	case yaml.SequenceNode:
		for _, item := range val.Content {
			sources = append(sources, resolve(item))
		}
	}
	var out []entry
	for _, m := range sources {
		if m.Kind != yaml.MappingNode {
			d.problem(val, path, "a merge key (<<) takes a mapping or a list of mappings, got %s", describe(m))
			continue
		}
		if visiting[m] {
			// A cycle would recurse forever.
			d.problem(val, path, "a mapping is merged into itself; remove the << key")
			continue
		}
		visiting[m] = true
		out = append(out, d.entriesOf(m, path, visiting)...)
		delete(visiting, m)
	}
	return out
}

// decodeStruct fills struct v from mapping n (nil: an absent section, which
// still gets its defaults).
func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	var order []string            // yaml names in field order
	fields := map[string]int{}    // yaml name → field index
	folded := map[string]string{} // lower-cased yaml name → yaml name
	for i := range t.NumField() {
		if name, ok := yamlName(t.Field(i)); ok {
			order = append(order, name)
			fields[name] = i
			folded[strings.ToLower(name)] = name
		}
	}
	values := map[string]entry{}
	if n != nil {
		es := d.entries(n, path)
		keyOf := map[string]*yaml.Node{}
		for _, e := range es {
			keyOf[resolve(e.key).Value] = e.key
		}
		for _, e := range es {
			key := resolve(e.key).Value
			if _, ok := fields[key]; ok {
				values[key] = e
				continue
			}
			name, caseOnly := folded[strings.ToLower(key)]
			switch first, both := keyOf[name]; {
			case caseOnly && both:
				d.problem(e.key, join(path, key), "duplicate key: %s at line %d:%d and %s at line %d:%d differ only in case; keys are case-sensitive, so %s is not a key: keep %s and remove %s",
					name, first.Line, first.Column, key, e.key.Line, e.key.Column, key, name, key)
			case caseOnly:
				d.problem(e.key, join(path, key), "unknown key (did you mean %s? keys are case-sensitive)", name)
			default:
				d.problem(e.key, join(path, key), "unknown key%s; remove it or fix the spelling", suggest(key, t))
			}
		}
	}
	for _, name := range order {
		i := fields[name]
		f, fv, fpath := t.Field(i), v.Field(i), join(path, name)
		if env, ok := d.envValue(fpath, f.Type); ok {
			d.decodeValue(env, fv, fpath)
			continue
		}
		e, present := values[name]
		if present {
			d.record(fpath, e.key)
		}
		if !present || isNull(resolve(e.value)) {
			def, ok := f.Tag.Lookup("default")
			switch {
			case ok:
				d.decodeValue(&yaml.Node{Kind: yaml.ScalarNode, Value: def}, fv, fpath)
			case f.Type.Kind() == reflect.Struct && f.Type != durationType:
				d.decodeStruct(nil, fv, fpath) // an absent section still gets its defaults
			}
			continue
		}
		d.decodeValue(e.value, fv, fpath)
		if def, ok := f.Tag.Lookup("default"); ok && d.src.broken[fpath] {
			// The default stands in for the value of the wrong type, so
			// checks of other keys compare against something sane.
			d.decodeValue(&yaml.Node{Kind: yaml.ScalarNode, Value: def}, fv, fpath)
		}
	}
}

// envValue returns the FAILOVERD_DAEMON_* override of the daemon section's
// scalar field at path, as a node. An empty variable is no override.
func (d *decoder) envValue(path string, t reflect.Type) (*yaml.Node, bool) {
	if d.lookupEnv == nil || !strings.HasPrefix(path, "daemon.") || !scalarKind(t) {
		return nil, false
	}
	name := EnvName(path)
	val, ok := d.lookupEnv(name)
	if !ok || val == "" {
		return nil, false
	}
	// Tagged as a string: the value is read from its text, as typed.
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: val}
	d.envNodes[n] = name
	d.src.at[path] = origin{env: name}
	return n, true
}

// EnvName is the environment variable overriding the daemon key at path:
// daemon.stateStore.path → FAILOVERD_DAEMON_STATESTORE_PATH.
func EnvName(path string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

func scalarKind(t reflect.Type) bool {
	if t == durationType {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int:
		return true
	}
	return false
}

// decodeValue fills v from n, reporting a value of the wrong type at path.
func (d *decoder) decodeValue(n *yaml.Node, v reflect.Value, path string) {
	n = resolve(n)
	if v.Type() == durationType {
		d.decodeDuration(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.Type().Elem().Kind() == reflect.Struct && n.Kind != yaml.MappingNode {
			// An optional section of the wrong type stays absent.
			d.broken(n, path, "expected a mapping of keys, got %s", describe(n))
			return
		}
		p := reflect.New(v.Type().Elem())
		d.decodeValue(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.broken(n, path, "expected a mapping of keys, got %s", describe(n))
			d.decodeStruct(nil, v, path) // defaults stand in, so checks of other keys see sane values
			return
		}
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.broken(n, path, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			ipath := fmt.Sprintf("%s[%d]", path, i)
			d.record(ipath, item)
			d.decodeValue(item, s.Index(i), ipath)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.broken(n, path, "expected a mapping of strings, got %s", describe(n))
			return
		}
		out := reflect.MakeMap(v.Type())
		for _, e := range d.entries(n, path) {
			key, kpath := resolve(e.key).Value, join(path, resolve(e.key).Value)
			d.record(kpath, e.key)
			val := resolve(e.value)
			if val.Kind != yaml.ScalarNode || isNull(val) {
				d.broken(val, kpath, "expected a string, got %s", describe(val))
				continue
			}
			out.SetMapIndex(reflect.ValueOf(key), reflect.ValueOf(val.Value))
		}
		v.Set(out)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || isNull(n) {
			d.broken(n, path, "expected a string, got %s", describe(n))
			return
		}
		v.SetString(n.Value) // the text as written: 0123 stays 0123
	case reflect.Bool:
		var b bool
		var err error
		switch {
		case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool":
			err = n.Decode(&b)
		case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
			b, err = strconv.ParseBool(strings.TrimSpace(n.Value))
		default:
			err = errors.New("not a boolean")
		}
		if err != nil {
			d.broken(n, path, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	case reflect.Int:
		var i int
		var err error
		switch {
		case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int":
			err = n.Decode(&i)
		case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
			i, err = strconv.Atoi(strings.TrimSpace(n.Value))
		default:
			err = errors.New("not an integer")
		}
		if err != nil {
			d.broken(n, path, "expected a whole number, got %s", describe(n))
			return
		}
		v.SetInt(int64(i))
	default:
		panic(fmt.Sprintf("configs: unsupported field kind %s at %s", v.Kind(), path))
	}
}

func (d *decoder) decodeDuration(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		// A bare number is ambiguous (seconds? nanoseconds?): refuse it.
		d.broken(n, path, "expected a duration with a unit such as 500ms, 2s or 10m, got %s", describe(n))
		return
	}
	dur, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		d.broken(n, path, "%q is not a duration; write it with a unit such as 500ms, 2s or 10m", n.Value)
		return
	}
	v.SetInt(int64(dur))
}

// yamlName is the key of field f, and whether the field is decoded at all.
func yamlName(f reflect.StructField) (string, bool) {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if !f.IsExported() || name == "-" {
		return "", false
	}
	if name == "" {
		return f.Name, true
	}
	return name, true
}

func describe(n *yaml.Node) string {
	switch {
	case isNull(n):
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.ShortTag() == "!!str":
		return strconv.Quote(n.Value)
	default:
		return n.Value
	}
}

// suggest returns " (did you mean X?)" for the known key of t closest to key.
func suggest(key string, t reflect.Type) string {
	best, bestDist := "", 4
	for i := range t.NumField() {
		name, ok := yamlName(t.Field(i))
		if !ok {
			continue
		}
		if dist := editDistance(strings.ToLower(key), strings.ToLower(name)); dist < bestDist {
			best, bestDist = name, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
