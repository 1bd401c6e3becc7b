package configs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/spf13/viper"
)

// ErrInvalid is wrapped by every error that reports configuration problems.
var ErrInvalid = errors.New("invalid configuration")

// EnvPrefix prefixes environment overrides: FAILOVERD_DAEMON_LISTEN overrides
// daemon.listen.
const EnvPrefix = "FAILOVERD"

// Problem is one thing wrong with a configuration: the YAML path and what to
// do about it.
type Problem struct {
	// Path is the YAML path, e.g. groups[0].sites[1].mysql.address.
	Path string
	// Message says what is wrong and how to fix it.
	Message string
}

func (p Problem) String() string { return p.Path + ": " + p.Message }

// Problems is every problem found in a configuration. As an error it lists
// them all, one per line.
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

// Load reads the YAML file at path, applies environment overrides for the
// daemon section and the defaults, and validates the result. On any problem
// it returns a *Problems error (wrapping ErrInvalid) listing all of them.
func Load(path string) (*Config, error) {
	v := viper.New()
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	bindDaemonEnv(v, reflect.TypeFor[Daemon](), "daemon")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if err := v.ReadInConfig(); err != nil {
		return nil, fmt.Errorf("read config %s: %w: %w", path, ErrInvalid, err)
	}
	return fromSettings(v.AllSettings(), filepath.Dir(path))
}

// Parse is Load for YAML held in memory (no environment overrides); relative
// file paths are taken relative to dir.
func Parse(yaml, dir string) (*Config, error) {
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(strings.NewReader(yaml)); err != nil {
		return nil, fmt.Errorf("parse config: %w: %w", ErrInvalid, err)
	}
	return fromSettings(v.AllSettings(), dir)
}

func fromSettings(raw map[string]any, dir string) (*Config, error) {
	problems := &Problems{}
	cfg := &Config{}
	(&decoder{problems: problems}).decode(raw, cfg)
	if err := problems.err(); err != nil {
		return nil, err
	}
	cfg.resolvePaths(dir)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// bindDaemonEnv binds FAILOVERD_DAEMON_* for every scalar field of the daemon
// section, so overrides work even for keys absent from the file.
func bindDaemonEnv(v *viper.Viper, t reflect.Type, prefix string) {
	for i := range t.NumField() {
		f := t.Field(i)
		key := prefix + "." + strings.ToLower(yamlName(f))
		if f.Type.Kind() == reflect.Struct && f.Type != durationType {
			bindDaemonEnv(v, f.Type, key)
			continue
		}
		_ = v.BindEnv(key) // only fails without a key, which we always pass
	}
}
