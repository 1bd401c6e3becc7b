package view

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// TestAnswerBindingCoversTheRequestAndTheView: a binding verifies only for
// the request it was made for (nonce, asking site, answerer), over the view
// it was made with and with the key; a replayed answer to another request
// does not verify.
func TestAnswerBindingCoversTheRequestAndTheView(t *testing.T) {
	key := []byte("k3y")
	s, _ := Sign(View{Group: "orders", Epoch: 7, ActiveSite: "east"}, key)
	req := Request{Nonce: NewNonce(), From: "east", By: ByPeer("north")}
	a, err := Bind(s, req, key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(a)
	var back Answer
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.VerifyBinding(req, key); err != nil {
		t.Fatalf("own request: %v", err)
	}
	// A requester that knows no bindings still reads the signed view.
	var old Signed
	if err := json.Unmarshal(b, &old); err != nil || !reflect.DeepEqual(old, s) {
		t.Fatalf("as a Signed view: %+v, %v", old, err)
	}
	other, _ := Sign(View{Group: "orders", Epoch: 8, ActiveSite: "east"}, key)
	for name, c := range map[string]struct {
		a   Answer
		req Request
		key []byte
	}{
		"replayed to a later request": {a, Request{Nonce: NewNonce(), From: "east", By: ByPeer("north")}, key},
		"another asking site":         {a, Request{Nonce: req.Nonce, From: "west", By: ByPeer("north")}, key},
		"another peer answered":       {a, Request{Nonce: req.Nonce, From: "east", By: ByPeer("west")}, key},
		"a peer posing as the daemon": {a, Request{Nonce: req.Nonce, From: "east", By: ByDaemon}, key},
		"another view, signed":        {Answer{Signed: other, Binding: a.Binding}, req, key},
		"another key":                 {a, req, []byte("other")},
		"garbage binding":             {Answer{Signed: s, Binding: "zz"}, req, key},
	} {
		if err := c.a.VerifyBinding(c.req, c.key); !errors.Is(err, ErrBadBinding) {
			t.Errorf("%s: %v, want ErrBadBinding", name, err)
		}
	}
	if err := (Answer{Signed: s}).VerifyBinding(req, key); !errors.Is(err, ErrUnbound) {
		t.Errorf("unbound answer: %v, want ErrUnbound", err)
	}
	// The view's own signature is no binding, nor is a report-style MAC.
	if err := (Answer{Signed: s, Binding: s.Signature}).VerifyBinding(req, key); !errors.Is(err, ErrBadBinding) {
		t.Errorf("the view signature as binding: %v", err)
	}
}

func TestNonces(t *testing.T) {
	n := NewNonce()
	if err := CheckNonce(n); err != nil || n == NewNonce() {
		t.Fatalf("NewNonce %q: %v", n, err)
	}
	for _, bad := range []string{"", "abc", n[:31], n + n + n + n + "00", "zz" + n[2:]} {
		if err := CheckNonce(bad); !errors.Is(err, ErrBadNonce) {
			t.Errorf("CheckNonce(%q) = %v", bad, err)
		}
	}
	if _, err := Bind(Signed{}, Request{Nonce: "short"}, []byte("k")); !errors.Is(err, ErrBadNonce) {
		t.Errorf("Bind with a bad nonce: %v", err)
	}
}
