package main

import (
	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/preflight"
)

// prestart loads the configuration at path and runs every check `failoverd
// run` makes before it starts: configs.Load (the file's own rules), then
// preflight.Check (the files it names, read as the daemon reads them: the
// secrets' content and length, TLS files, kubeconfigs). `run` and
// `validate` both call it, so validate accepts exactly what run starts with
// (TestValidateAndRunRefuseAlike). Problems come back as a
// *configs.Problems error (every one at once); warnings as lines, those of
// preflight with their file:line:col.
func prestart(path string) (*configs.Config, []string, error) {
	cfg, err := configs.Load(path)
	if err != nil {
		return nil, nil, err
	}
	// The files are read only once the file itself is valid: the paths
	// they are read from are part of what it checks.
	found, err := preflight.Check(cfg)
	if err != nil {
		return nil, nil, err
	}
	warnings := cfg.Warnings()
	for _, w := range found {
		warnings = append(warnings, w.String())
	}
	return cfg, warnings, nil
}
