package configs

import "errors"

// MinAPITokenLength is the shortest read or admin token accepted, in bytes:
// a token is a password every request offers, and a short one is guessed
// (`openssl rand -hex 32` makes a good one).
const MinAPITokenLength = 16

// APITokens are the bearer tokens of the daemon's API, read from the files
// the daemon section names (see ReadAPITokens). An empty token is one not
// configured.
type APITokens struct {
	// Operate is daemon.apiTokenFile's: every command ("" disables them).
	Operate string
	// Read is daemon.apiReadTokenFile's ("" leaves the status reads open).
	Read string
	// Admin is daemon.apiAdminTokenFile's ("" lets confirm-fence and
	// reclone take the operate token).
	Admin string
}

// ReadAPITokens reads the API token files of c's daemon section and checks
// their content: a file that is set must hold a token; the read and admin
// tokens must be at least MinAPITokenLength bytes; no two tokens may be
// equal. It reports every problem at once (a *Problems naming the field and
// the fix; never a token's content). The daemon's start calls it before it
// serves anything; it is kept apart from Validate because it reads secrets
// (`failoverd validate` may call it as one of the start's checks).
func (c *Config) ReadAPITokens() (APITokens, error) {
	d := c.Daemon
	ps := &Problems{}
	var tok APITokens
	fields := []struct {
		path, file string
		dst        *string
		min        int
	}{
		// The operate token predates the minimum length; only the new
		// tokens are held to it here.
		{"daemon.apiTokenFile", d.APITokenFile, &tok.Operate, 1},
		{"daemon.apiReadTokenFile", d.APIReadTokenFile, &tok.Read, MinAPITokenLength},
		{"daemon.apiAdminTokenFile", d.APIAdminTokenFile, &tok.Admin, MinAPITokenLength},
	}
	seen := map[string]string{} // token → the field that holds it
	for _, f := range fields {
		if f.file == "" {
			continue
		}
		s, err := ReadSecret(f.file)
		switch {
		case errors.Is(err, ErrInvalid):
			ps.add(f.path, "%s is empty; write a random token into it (e.g. openssl rand -hex 32 > %s)", f.file, f.file)
			continue
		case err != nil:
			ps.add(f.path, "cannot read %s (%s); fix the path or the file's permissions", f.file, reason(errors.Unwrap(err)))
			continue
		}
		if len(s) < f.min {
			ps.add(f.path, "the token in %s has %d bytes, fewer than %d: a short token is guessed; write a random one (e.g. openssl rand -hex 32 > %s)",
				f.file, len(s), f.min, f.file)
			continue
		}
		// Two roles with one token are one role: a read token equal to
		// the operate token would let every reader run commands.
		if other, dup := seen[s]; dup {
			ps.add(f.path, "holds the same token as %s: each token grants its own rights, so one shared token grants both; write a different random token", other)
			continue
		}
		seen[s] = f.path
		*f.dst = s
	}
	for i := range ps.List {
		c.src.place(&ps.List[i])
	}
	ps.sort()
	if err := ps.err(); err != nil {
		return APITokens{}, err
	}
	return tok, nil
}
