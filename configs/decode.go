package configs

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// decoder turns the generic map that viper reads into the typed Config. It is
// strict where viper is lenient: unknown keys (typos) and values of the wrong
// type are problems that name their YAML path, and `default` tags fill in
// absent keys.
type decoder struct {
	problems *Problems
}

var durationType = reflect.TypeFor[time.Duration]()

// decode fills dst (a pointer to a struct) from raw, reporting every problem.
func (d *decoder) decode(raw map[string]any, dst any) {
	d.decodeStruct(raw, reflect.ValueOf(dst).Elem(), "")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (d *decoder) decodeStruct(raw map[string]any, v reflect.Value, path string) {
	t := v.Type()
	known := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		known[strings.ToLower(yamlName(t.Field(i)))] = i
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := known[strings.ToLower(k)]; !ok {
			d.problems.add(join(path, k), "unknown key%s; remove it or fix the spelling", suggest(k, t))
		}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name := yamlName(f)
		val, present := lookup(raw, name)
		if !present || val == nil {
			def, ok := f.Tag.Lookup("default")
			switch {
			case ok:
				val = def
			case f.Type.Kind() == reflect.Struct && f.Type != durationType:
				val = map[string]any{} // an absent section still gets its defaults
			default:
				continue
			}
		}
		d.decodeValue(val, v.Field(i), join(path, name))
	}
}

func (d *decoder) decodeValue(val any, v reflect.Value, path string) {
	if v.Type() == durationType {
		d.decodeDuration(val, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if val == nil {
			return
		}
		p := reflect.New(v.Type().Elem())
		d.decodeValue(val, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		m, ok := val.(map[string]any)
		if !ok {
			d.problems.add(path, "expected a mapping of keys, got %s", describe(val))
			return
		}
		d.decodeStruct(m, v, path)
	case reflect.Slice:
		items, ok := val.([]any)
		if !ok {
			d.problems.add(path, "expected a list, got %s", describe(val))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, item := range items {
			d.decodeValue(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		m, ok := val.(map[string]any)
		if !ok {
			d.problems.add(path, "expected a mapping of strings, got %s", describe(val))
			return
		}
		out := reflect.MakeMapWithSize(v.Type(), len(m))
		for k, item := range m {
			s, ok := scalarString(item)
			if !ok {
				d.problems.add(join(path, k), "expected a string, got %s", describe(item))
				continue
			}
			out.SetMapIndex(reflect.ValueOf(k), reflect.ValueOf(s))
		}
		v.Set(out)
	case reflect.String:
		s, ok := scalarString(val)
		if !ok {
			d.problems.add(path, "expected a string, got %s", describe(val))
			return
		}
		v.SetString(s)
	case reflect.Bool:
		switch b := val.(type) {
		case bool:
			v.SetBool(b)
		case string:
			parsed, err := strconv.ParseBool(b)
			if err != nil {
				d.problems.add(path, "expected true or false, got %q", b)
				return
			}
			v.SetBool(parsed)
		default:
			d.problems.add(path, "expected true or false, got %s", describe(val))
		}
	case reflect.Int:
		switch n := val.(type) {
		case int:
			v.SetInt(int64(n))
		case int64:
			v.SetInt(n)
		case string:
			parsed, err := strconv.Atoi(strings.TrimSpace(n))
			if err != nil {
				d.problems.add(path, "expected a whole number, got %q", n)
				return
			}
			v.SetInt(int64(parsed))
		default:
			d.problems.add(path, "expected a whole number, got %s", describe(val))
		}
	default:
		panic(fmt.Sprintf("configs: unsupported field kind %s at %s", v.Kind(), path))
	}
}

func (d *decoder) decodeDuration(val any, v reflect.Value, path string) {
	s, ok := val.(string)
	if !ok {
		// A bare number is ambiguous (seconds? nanoseconds?): refuse it.
		d.problems.add(path, "expected a duration with a unit such as 500ms, 2s or 10m, got %s", describe(val))
		return
	}
	dur, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		d.problems.add(path, "%q is not a duration; write it with a unit such as 500ms, 2s or 10m", s)
		return
	}
	v.SetInt(int64(dur))
}

// lookup finds key in raw case-insensitively (viper lowercases keys).
func lookup(raw map[string]any, key string) (any, bool) {
	if v, ok := raw[key]; ok {
		return v, true
	}
	for k, v := range raw {
		if strings.EqualFold(k, key) {
			return v, true
		}
	}
	return nil, false
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

func scalarString(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case int, int64, float64, bool:
		return fmt.Sprint(s), true
	}
	return "", false
}

func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "nothing"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return strconv.Quote(v)
	default:
		return fmt.Sprintf("%v", v)
	}
}

// suggest returns "; did you mean X?" for the known key of t closest to key.
func suggest(key string, t reflect.Type) string {
	best, bestDist := "", 4
	for i := range t.NumField() {
		name := yamlName(t.Field(i))
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
