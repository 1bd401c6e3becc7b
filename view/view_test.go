package view

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestSignVerifyRoundTripThroughJSON(t *testing.T) {
	key := []byte("k3y")
	v := View{Group: "orders", Epoch: 7, ActiveSite: "east", IssuedAt: time.Date(2026, 11, 22, 1, 2, 3, 4, time.UTC)}
	s, err := Sign(v, key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	var back Signed
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got, err := back.Verify(key)
	if err != nil || got != v {
		t.Fatalf("Verify = %+v, %v; want %+v", got, err, v)
	}
}

func TestVerifyRejectsTampering(t *testing.T) {
	key := []byte("k3y")
	s, _ := Sign(View{Group: "orders", Epoch: 7, ActiveSite: "east"}, key)
	cases := map[string]func(s *Signed){
		"other site":  func(s *Signed) { s.View.ActiveSite = "west" },
		"older epoch": func(s *Signed) { s.View.Epoch = 6 },
		"other group": func(s *Signed) { s.View.Group = "payments" },
		"garbage sig": func(s *Signed) { s.Signature = "zz" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			c := s
			mutate(&c)
			if _, err := c.Verify(key); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("Verify: %v, want ErrBadSignature", err)
			}
		})
	}
	if _, err := s.Verify([]byte("other key")); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("wrong key: %v", err)
	}
	if _, err := Sign(View{}, nil); !errors.Is(err, ErrNoKey) {
		t.Fatalf("empty key: %v", err)
	}
}

func TestSupersedesAndAllows(t *testing.T) {
	a := View{Group: "g", Epoch: 3, ActiveSite: "east"}
	revoked := View{Group: "g", Epoch: 4}
	if !revoked.Supersedes(a) || a.Supersedes(revoked) || a.Supersedes(a) {
		t.Error("epoch ordering wrong")
	}
	if (View{Group: "h", Epoch: 9}).Supersedes(a) {
		t.Error("another group's view superseded")
	}
	if !a.Allows("east") || a.Allows("west") || revoked.Allows("east") || revoked.Allows("") {
		t.Error("Allows wrong")
	}
}

func TestSignBytesVerifyBytes(t *testing.T) {
	key, body := []byte("k3y"), []byte(`{"group":"g","site":"a"}`)
	sig := SignBytes(body, key)
	if !VerifyBytes(body, sig, key) {
		t.Fatal("own signature refused")
	}
	for name, c := range map[string]struct {
		body []byte
		sig  string
		key  []byte
	}{
		"other body": {[]byte(`{"group":"g","site":"b"}`), sig, key},
		"other key":  {body, sig, []byte("other")},
		"no key":     {body, sig, nil},
		"not hex":    {body, "zz", key},
		"empty":      {body, "", key},
	} {
		if VerifyBytes(c.body, c.sig, c.key) {
			t.Errorf("%s: accepted", name)
		}
	}
}
