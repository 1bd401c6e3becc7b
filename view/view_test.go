package view

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
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
	if err != nil || !reflect.DeepEqual(got, v) {
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

// oldView and oldSigned are the wire types as the version before read
// exclusions declared them: what an older sidecar decodes and re-encodes.
type oldView struct {
	Group      string    `json:"group"`
	Epoch      uint64    `json:"epoch"`
	ActiveSite string    `json:"activeSite"`
	IssuedAt   time.Time `json:"issuedAt"`
}

type oldSigned struct {
	View      oldView `json:"view"`
	Signature string  `json:"signature"`
}

// oldVerify is the older sidecar's check: HMAC of its re-encoded view.
func oldVerify(t *testing.T, wire []byte, key []byte) bool {
	t.Helper()
	var s oldSigned
	if err := json.Unmarshal(wire, &s); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s.View)
	m := hmac.New(sha256.New, key)
	m.Write(b)
	got, err := hex.DecodeString(s.Signature)
	return err == nil && hmac.Equal(got, m.Sum(nil))
}

// Guards the wire compatibility of read exclusions: a view without them
// encodes byte for byte as the older struct did, and an older sidecar
// verifies every view a newer daemon signs, exclusions or not (it drops
// the read fields), so no upgrade order is needed for them.
func TestViewWithoutExclusionsEncodesAsBeforeAndOldSidecarsVerifyEveryView(t *testing.T) {
	at := time.Date(2026, 11, 22, 1, 2, 3, 4, time.UTC)
	plain := View{Group: "orders", Epoch: 7, ActiveSite: "east", IssuedAt: at}
	got, _ := json.Marshal(plain)
	want, _ := json.Marshal(oldView{Group: "orders", Epoch: 7, ActiveSite: "east", IssuedAt: at})
	if string(got) != string(want) {
		t.Fatalf("a view without exclusions encodes as\n%s\nwant the older encoding\n%s", got, want)
	}
	key := []byte("k3y")
	for name, v := range map[string]View{
		"no exclusions":   plain,
		"seq only":        {Group: "orders", Epoch: 7, ActiveSite: "east", IssuedAt: at, Seq: 1764000000000},
		"with exclusions": {Group: "orders", Epoch: 7, ActiveSite: "east", IssuedAt: at, Seq: 1764000000001, NoReads: map[string]string{"west": "diverged"}},
		"revoked":         {Group: "orders", Epoch: 8, IssuedAt: at, Seq: 1764000000002, NoReads: map[string]string{"west": "recloning"}},
	} {
		s, err := Sign(v, key)
		if err != nil {
			t.Fatal(err)
		}
		wire, _ := json.Marshal(s)
		if !oldVerify(t, wire, key) {
			t.Errorf("%s: an older sidecar rejects %s", name, wire)
		}
		// What the older sidecar serves its peers: the read fields gone.
		var old oldSigned
		_ = json.Unmarshal(wire, &old)
		relayed, _ := json.Marshal(old)
		var back Signed
		_ = json.Unmarshal(relayed, &back)
		if got, err := back.Verify(key); err != nil || got.Seq != 0 || got.NoReads != nil || got.ActiveSite != v.ActiveSite {
			t.Errorf("%s: relayed by an older sidecar: %+v, %v; want the fencing fields, no read fields", name, got, err)
		}
	}
}

// Guards that read exclusions and their order are signed: a forged or
// altered exclusion list (or Seq) must neither hold a site out of reads
// nor hold back the daemon's newer exclusions.
func TestVerifyRejectsUnsignedOrAlteredReadFields(t *testing.T) {
	key := []byte("k3y")
	s, _ := Sign(View{Group: "orders", Epoch: 7, ActiveSite: "east", Seq: 10, NoReads: map[string]string{"west": "diverged"}}, key)
	if got, err := s.Verify(key); err != nil || got.NoReads["west"] != "diverged" || got.Seq != 10 {
		t.Fatalf("own view: %+v, %v", got, err)
	}
	cases := map[string]func(s *Signed){
		"exclusion lifted":       func(s *Signed) { s.View.NoReads = nil },
		"exclusion added":        func(s *Signed) { s.View.NoReads = map[string]string{"west": "diverged", "north": "diverged"} },
		"reason changed":         func(s *Signed) { s.View.NoReads = map[string]string{"west": "recloning"} },
		"seq raised":             func(s *Signed) { s.View.Seq = 11 },
		"read signature gone":    func(s *Signed) { s.ReadSignature = "" },
		"read signature not hex": func(s *Signed) { s.ReadSignature = "zz" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			c := s
			c.View.NoReads = map[string]string{"west": "diverged"}
			mutate(&c)
			if _, err := c.Verify(key); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("Verify: %v, want ErrBadSignature", err)
			}
		})
	}
	// Another view's read signature does not carry over (it covers the
	// fencing fields too).
	other, _ := Sign(View{Group: "orders", Epoch: 7, ActiveSite: "east", IssuedAt: time.Unix(1, 0), Seq: 9}, key)
	c := other
	c.View.Seq, c.View.NoReads, c.ReadSignature = s.View.Seq, s.View.NoReads, s.ReadSignature
	if _, err := c.Verify(key); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("read fields moved onto another view: %v, want ErrBadSignature", err)
	}
}

// Guards the order within an epoch: only a higher Seq of the same group,
// epoch and active site refreshes the read exclusions; Seq never orders
// two active sites of one epoch, nor crosses epochs (Supersedes does).
func TestRefreshesOrdersReadExclusionsWithinAnEpochOnly(t *testing.T) {
	cur := View{Group: "g", Epoch: 5, ActiveSite: "east", Seq: 100, NoReads: map[string]string{"west": "diverged"}}
	for name, c := range map[string]struct {
		v    View
		want bool
	}{
		"newer seq":           {View{Group: "g", Epoch: 5, ActiveSite: "east", Seq: 101}, true},
		"same seq":            {View{Group: "g", Epoch: 5, ActiveSite: "east", Seq: 100}, false},
		"older seq":           {View{Group: "g", Epoch: 5, ActiveSite: "east", Seq: 99}, false},
		"older daemon (0)":    {View{Group: "g", Epoch: 5, ActiveSite: "east"}, false},
		"other active site":   {View{Group: "g", Epoch: 5, ActiveSite: "west", Seq: 200}, false},
		"revoked, same epoch": {View{Group: "g", Epoch: 5, Seq: 200}, false},
		"newer epoch":         {View{Group: "g", Epoch: 6, ActiveSite: "east", Seq: 1}, false},
		"other group":         {View{Group: "h", Epoch: 5, ActiveSite: "east", Seq: 200}, false},
	} {
		if got := c.v.Refreshes(cur); got != c.want {
			t.Errorf("%s: Refreshes = %v, want %v", name, got, c.want)
		}
	}
	if why, ok := cur.Withheld("west"); !ok || why != "diverged" {
		t.Errorf("Withheld(west) = %q, %v", why, ok)
	}
	if _, ok := cur.Withheld("east"); ok {
		t.Error("east withheld")
	}
}
