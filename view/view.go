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
// Views are ordered by epoch only: IssuedAt is informational and never
// compared with another machine's clock.
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
}

// Signed is a view with its signature, as served and gossiped.
type Signed struct {
	View View `json:"view"`
	// Signature is the hex HMAC-SHA256 of the view's JSON encoding.
	Signature string `json:"signature"`
}

// Sign signs v with key.
func Sign(v View, key []byte) (Signed, error) {
	if len(key) == 0 {
		return Signed{}, ErrNoKey
	}
	mac, err := digest(v, key)
	if err != nil {
		return Signed{}, err
	}
	return Signed{View: v, Signature: hex.EncodeToString(mac)}, nil
}

// Verify returns the view when its signature matches key.
func (s Signed) Verify(key []byte) (View, error) {
	if len(key) == 0 {
		return View{}, ErrNoKey
	}
	want, err := digest(s.View, key)
	if err != nil {
		return View{}, err
	}
	got, err := hex.DecodeString(s.Signature)
	if err != nil || !hmac.Equal(got, want) {
		return View{}, fmt.Errorf("verify view of group %s epoch %d: %w", s.View.Group, s.View.Epoch, ErrBadSignature)
	}
	return s.View, nil
}

func digest(v View, key []byte) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode view: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(nil), nil
}

// Supersedes reports whether v should replace old: same group, higher epoch.
func (v View) Supersedes(old View) bool {
	return v.Group == old.Group && v.Epoch > old.Epoch
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
