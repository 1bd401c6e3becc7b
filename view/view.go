// Package view is the daemon's authoritative view of each group — which site
// may accept writes, under which epoch — as a signed document. The daemon
// serves it at /active-site; sidecars fetch it, gossip it to each other and
// fence their own MySQL when the newest view they trust names another site
// or no site. Signing (HMAC-SHA256 with daemon.viewSigningKeyFile) lets a
// sidecar trust a copy that reached it through a peer.
//
// The package holds the whole signed protocol between the daemon and its
// sidecars, so both sides share it without importing each other: views,
// answers bound to a request's nonce (answer.go), and the sidecar's Report
// with its path and signature header (report.go).
//
// Fencing orders views by epoch only: IssuedAt is informational and never
// compared with another machine's clock. Within one epoch, Seq orders the
// read exclusions (NoReads), which change without an epoch change; it never
// orders ActiveSite.
//
// Two signatures: Signature covers the fencing fields exactly as the
// version before read exclusions encoded a view (so an older sidecar still
// verifies every view), ReadSignature covers the whole view, Seq and
// NoReads included.
package view

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors.
var (
	// ErrBadSignature means the view was not signed with our key (forged,
	// corrupted, or signed by a daemon with another key).
	ErrBadSignature = errors.New("view signature does not match")
	// ErrNoKey means no signing key was configured.
	ErrNoKey = errors.New("no view signing key")
)

// View is the authoritative state of one group.
type View struct {
	// Group is the group's name.
	Group string `json:"group"`
	// Epoch only grows; a higher epoch supersedes every lower one.
	Epoch uint64 `json:"epoch"`
	// ActiveSite may accept writes; "" means none (a failover revoked the
	// old primary and has not promoted the new one yet).
	ActiveSite string `json:"activeSite"`
	// IssuedAt is the daemon's clock when it signed (for humans only).
	IssuedAt time.Time `json:"issuedAt"`
	// Seq orders views of one epoch (0: a daemon that predates it): the
	// read exclusions change without an epoch change, and a peer's older
	// copy must not undo a newer one. The issuing daemon's clock in Unix
	// milliseconds, kept strictly increasing by that daemon.
	Seq uint64 `json:"seq,omitempty"`
	// NoReads maps the sites the daemon withholds from reads for a safety
	// reason (diverged, recloning, fenced by the operator, held for
	// maintenance, replicating from another source than the primary) to
	// that reason. Lag is not one: each sidecar judges its own.
	NoReads map[string]string `json:"noReads,omitempty"`
}

// fencingView is View as encoded before read exclusions: what Signature
// covers, byte for byte, so an older sidecar (which decodes and re-encodes
// only these fields) verifies every view a newer daemon signs.
type fencingView struct {
	Group      string    `json:"group"`
	Epoch      uint64    `json:"epoch"`
	ActiveSite string    `json:"activeSite"`
	IssuedAt   time.Time `json:"issuedAt"`
}

func (v View) fencing() fencingView {
	return fencingView{Group: v.Group, Epoch: v.Epoch, ActiveSite: v.ActiveSite, IssuedAt: v.IssuedAt}
}

// Signed is a view with its signatures, as served and gossiped.
type Signed struct {
	View View `json:"view"`
	// Signature is the hex HMAC-SHA256 of the view's fencing fields' JSON
	// encoding (group, epoch, activeSite, issuedAt).
	Signature string `json:"signature"`
	// ReadSignature is the hex HMAC-SHA256 of readDomain and the whole
	// view's JSON encoding (Seq and NoReads included); empty from a daemon
	// that predates read exclusions, whose views carry neither.
	ReadSignature string `json:"readSignature,omitempty"`
}

// readDomain starts the message ReadSignature covers: no view, binding or
// report signed with the same key begins with it.
const readDomain = "failoverd view reads v1\x00"

// Sign signs v with key.
func Sign(v View, key []byte) (Signed, error) {
	if len(key) == 0 {
		return Signed{}, ErrNoKey
	}
	mac, err := digest(v.fencing(), key, "")
	if err != nil {
		return Signed{}, err
	}
	rmac, err := digest(v, key, readDomain)
	if err != nil {
		return Signed{}, err
	}
	return Signed{View: v, Signature: hex.EncodeToString(mac), ReadSignature: hex.EncodeToString(rmac)}, nil
}

// Verify returns the view when its signatures match key: Signature always,
// ReadSignature when present. A view without ReadSignature (an older
// daemon's, or one whose copy passed through an older sidecar, which drops
// the read fields) is trusted only without Seq and NoReads.
func (s Signed) Verify(key []byte) (View, error) {
	if len(key) == 0 {
		return View{}, ErrNoKey
	}
	bad := fmt.Errorf("verify view of group %s epoch %d: %w", s.View.Group, s.View.Epoch, ErrBadSignature)
	if !macMatches(s.Signature, s.View.fencing(), key, "") {
		return View{}, bad
	}
	if s.ReadSignature == "" {
		// Unsigned exclusions or sequence could hold a site out of reads,
		// or hold back the newer exclusions, on anyone's word.
		if s.View.Seq != 0 || len(s.View.NoReads) > 0 {
			return View{}, bad
		}
		return s.View, nil
	}
	if !macMatches(s.ReadSignature, s.View, key, readDomain) {
		return View{}, bad
	}
	return s.View, nil
}

func macMatches(sig string, v any, key []byte, domain string) bool {
	want, err := digest(v, key, domain)
	if err != nil {
		return false
	}
	got, err := hex.DecodeString(sig)
	return err == nil && hmac.Equal(got, want)
}

func digest(v any, key []byte, domain string) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode view: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(domain))
	m.Write(b)
	return m.Sum(nil), nil
}

// Supersedes reports whether v should replace old: same group, higher epoch.
func (v View) Supersedes(old View) bool {
	return v.Group == old.Group && v.Epoch > old.Epoch
}

// Refreshes reports whether v should replace old's read exclusions: same
// group, epoch and active site, higher Seq. It never orders two active
// sites: two views of one epoch naming different sites conflict, whatever
// their Seq.
func (v View) Refreshes(old View) bool {
	return v.Group == old.Group && v.Epoch == old.Epoch && v.ActiveSite == old.ActiveSite && v.Seq > old.Seq
}

// Withheld returns why the view withholds site from reads, and whether it
// does.
func (v View) Withheld(site string) (string, bool) {
	why, ok := v.NoReads[site]
	return why, ok
}

// Allows reports whether the view lets site accept writes.
func (v View) Allows(site string) bool {
	return site != "" && v.ActiveSite == site
}

// SignBytes returns the hex HMAC-SHA256 of body with key: how a sidecar
// signs the report it sends the daemon (header X-Failoverd-Signature).
func SignBytes(body, key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// VerifyBytes reports whether sig is SignBytes(body, key); false for an
// empty key.
func VerifyBytes(body []byte, sig string, key []byte) bool {
	if len(key) == 0 {
		return false
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}
