package configs

import (
	"fmt"
	"os"
	"path/filepath"
)

// Sidecar scope: `failoverd sidecar` reads the daemon's configuration file
// (one file describes every site), but a site's sidecar uses only a few of
// its settings and secrets. LoadSidecar checks those, and opens only their
// files: a MySQL pod's namespace then holds a Secret with the view signing
// key and the sidecar account's password, never the daemon's API token, its
// kubeconfigs or its own MySQL accounts (deploy/kubernetes
// sidecar-secret.example.yaml).

// LoadSidecar is Load for the sidecar of site in group: it reads the YAML
// file at path with the same environment overrides and defaults, reports
// every problem of the file itself (syntax, unknown keys, wrong types), but
// validates only what that sidecar uses (ValidateSidecar). Whatever else the
// file names (daemon.apiTokenFile, clusters[].kubeconfig, the daemon's and
// the replication accounts when credentials.sidecar is set, other groups,
// caches, the daemon's TLS and store) is never opened, and its absence is no
// problem. A group or site the file lacks is left to the caller
// (sidecar.FromConfig reports it).
func LoadSidecar(path, group, site string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return loadChecked(data, path, filepath.Dir(path), os.LookupEnv, sidecarCheck(group, site))
}

// ParseSidecar is LoadSidecar for YAML held in memory (as Parse).
func ParseSidecar(yaml, dir, group, site string) (*Config, error) {
	return loadChecked([]byte(yaml), "", dir, nil, sidecarCheck(group, site))
}

func sidecarCheck(group, site string) func(*Config) error {
	return func(c *Config) error { return c.ValidateSidecar(group, site) }
}

// ValidateSidecar is Validate restricted to what the sidecar of site in
// group uses: daemon.viewSigningKeyFile (it verifies views and signs its
// reports), the group's sidecar account (credentials.sidecar, else
// credentials.admin) and MySQL TLS, the group's sidecar timings, its own
// site's mysql.address and every sidecar.address of the group (its own,
// where it listens, and its peers'). It opens only those files. Problems are
// reported all at once as a *Problems error, like Validate's.
func (c *Config) ValidateSidecar(group, site string) error {
	v := &validator{problems: &Problems{}, clusters: map[string]bool{}, src: c.src}
	switch key := c.Daemon.ViewSigningKeyFile; {
	case key == "":
		// The sidecar trusts only views signed with this key.
		v.add("daemon.viewSigningKeyFile", "missing; the sidecar verifies the daemon's views and signs its reports with this key: point it at the file holding the daemon's view signing key")
	default:
		v.readable("daemon.viewSigningKeyFile", key)
	}
	found := -1
	for i, g := range c.Groups {
		if g.Name != group {
			continue
		}
		path := fmt.Sprintf("groups[%d]", i)
		if found >= 0 {
			// Two groups of that name: which one the sidecar guards would be a guess.
			v.add(path+".name", "duplicate group name %q (also groups[%d]); give each group its own name", g.Name, found)
			continue
		}
		found = i
		v.sidecarGroup(path, g, site)
	}
	return c.located(v.problems)
}

// sidecarGroup checks what the sidecar of site uses in group g.
func (v *validator) sidecarGroup(path string, g Group, site string) {
	acct, acctPath := g.Credentials.SidecarAccount(), path+".credentials.admin"
	if g.Credentials.Sidecar != nil {
		acctPath = path + ".credentials.sidecar"
	}
	v.account(acctPath, acct)
	v.tls(path+".tls", g.TLS)
	v.positive(path+".sidecar.leaseTimeout", g.Sidecar.LeaseTimeout)
	v.positive(path+".sidecar.checkInterval", g.Sidecar.CheckInterval)
	if g.Sidecar.CheckInterval > 0 && 2*g.Sidecar.CheckInterval > g.Sidecar.LeaseTimeout && v.intact(path+".sidecar") {
		// A lease checked too rarely could outlive its timeout before the sidecar fences.
		v.add(path+".sidecar.checkInterval", "%s must be at most half of leaseTimeout %s", g.Sidecar.CheckInterval, g.Sidecar.LeaseTimeout)
	}
	mine := -1
	for i, s := range g.Sites {
		sp := fmt.Sprintf("%s.sites[%d]", path, i)
		if s.Name == site {
			if mine >= 0 {
				// Two sites of that name: which one it fences would be a guess.
				v.add(sp+".name", "duplicate site name %q (also %s.sites[%d]); give each site its own name", s.Name, path, mine)
				continue
			}
			mine = i
			v.hostPort(sp+".mysql.address", s.MySQL.Address, false)
		}
		if s.Sidecar != nil {
			// Its own listen address, or a peer it dials.
			v.hostPort(sp+".sidecar.address", s.Sidecar.Address, false)
		}
	}
}

// located gives each problem its file position and drops those standing
// for a value already reported with the wrong type, as Validate does.
func (c *Config) located(problems *Problems) error {
	out := &Problems{}
	for _, p := range problems.List {
		if c.src.hides(p.Path) {
			// The value there had the wrong type and is reported as such;
			// the zero value or default standing in for it is no problem.
			continue
		}
		c.src.place(&p)
		out.List = append(out.List, p)
	}
	out.sort()
	return out.err()
}
