package view

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// Sentinel errors of answer bindings.
var (
	// ErrUnbound means an answer carries no binding: its server predates
	// bindings, or did not record the request (an unknown asking site).
	ErrUnbound = errors.New("answer is not bound to the request")
	// ErrBadBinding means the binding was made for another request (a
	// replayed answer), by another server, over another view, or with
	// another key.
	ErrBadBinding = errors.New("answer binding does not match the request")
	// ErrBadNonce means a nonce is not 32 to 128 hex digits.
	ErrBadNonce = errors.New("nonce must be 32 to 128 hex digits")
)

// Answerers: who binds an answer (Request.By).
const (
	// ByDaemon is the leading daemon answering POST /v1/sidecar/report.
	ByDaemon = "daemon"
	// byPeerPrefix + site is a peer sidecar answering /peer/active-site.
	byPeerPrefix = "peer:"
)

// ByPeer is Request.By for the sidecar of site (distinct from ByDaemon for
// any site name).
func ByPeer(site string) string { return byPeerPrefix + site }

// Request identifies one request for a view: what an answer is bound to.
type Request struct {
	// Nonce is the requester's fresh random value (NewNonce).
	Nonce string
	// From is the asking site.
	From string
	// By is who answers: ByDaemon or ByPeer(site).
	By string
}

// Answer is a signed view as answered to one request. Its JSON is the
// Signed view's plus "binding", so a requester that knows no bindings reads
// it as a Signed view.
type Answer struct {
	Signed
	// Binding is the hex HMAC-SHA256 (the view signing key) over the
	// request (nonce, asking site, answerer) and the view's signature (which
	// covers the view); empty when the answer is not bound.
	Binding string `json:"binding,omitempty"`
	// Token is the daemon's receipt for the report it answers; the sidecar
	// echoes it in its next report of the same boot, which proves to the
	// daemon that the sidecar still ran that boot after the token was
	// issued. Not covered by Binding: an altered token is unknown to the
	// daemon and only makes it more cautious.
	Token string `json:"token,omitempty"`
}

// NewNonce returns 128 random bits in hex: a request's nonce.
func NewNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it aborts the program instead)
	return hex.EncodeToString(b)
}

// CheckNonce accepts 32 to 128 hex digits: what NewNonce makes, with room
// to grow, and bounded for what a server signs on an anonymous request.
func CheckNonce(n string) error {
	if len(n) < 32 || len(n) > 128 {
		return ErrBadNonce
	}
	if _, err := hex.DecodeString(n); err != nil {
		return ErrBadNonce
	}
	return nil
}

// Bind binds s to r with key.
func Bind(s Signed, r Request, key []byte) (Answer, error) {
	if len(key) == 0 {
		return Answer{}, ErrNoKey
	}
	if err := CheckNonce(r.Nonce); err != nil {
		return Answer{}, fmt.Errorf("bind answer: %w", err)
	}
	return Answer{Signed: s, Binding: hex.EncodeToString(answerMAC(s, r, key))}, nil
}

// VerifyBinding checks that a was bound to r with key: made by r.By for
// this very request, after its nonce existed. It covers the view through
// its signature only: the caller must also check that signature
// (Signed.Verify), as it does before using any view.
func (a Answer) VerifyBinding(r Request, key []byte) error {
	if len(key) == 0 {
		return ErrNoKey
	}
	if a.Binding == "" {
		return ErrUnbound
	}
	got, err := hex.DecodeString(a.Binding)
	if err != nil || !hmac.Equal(got, answerMAC(a.Signed, r, key)) {
		return fmt.Errorf("binding of epoch %d answered by %s to %s: %w", a.View.Epoch, r.By, r.From, ErrBadBinding)
	}
	return nil
}

// answerDomain starts every bound message: no view (a JSON object) nor
// report body (one too) signed with the same key begins with it, so no
// other signature made with the key verifies as a binding.
const answerDomain = "failoverd view answer v1\x00"

// answerMAC is the HMAC over answerDomain and the length-prefixed answerer,
// asking site, nonce and view signature. The signature stands for the view
// (it is the view's HMAC with the same key): another view under it does
// not verify. It stands for the fencing fields (with IssuedAt, the
// instant of signing); the read fields are tied to them by ReadSignature,
// which covers both, so a binding needs nothing more.
func answerMAC(s Signed, r Request, key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(answerDomain))
	for _, f := range []string{r.By, r.From, r.Nonce, s.Signature} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write([]byte(f))
	}
	return m.Sum(nil)
}
