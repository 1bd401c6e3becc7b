package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/view"
)

// TestSidecarWatchIsHeldUntilANewerViewIsPublished (issue 32): a watch
// naming an older view than the published one is answered at once; one
// naming the published view is held until the next publish (then answered
// newer) or until its wait ends (answered not newer), and a stopping daemon
// releases it; a watch not signed with the view key is refused before
// anything is held.
func TestSidecarWatchIsHeldUntilANewerViewIsPublished(t *testing.T) {
	p := &publisher{key: []byte("secret")}
	p.set(view.View{Group: "g", Epoch: 4, ActiveSite: "a", IssuedAt: t0})
	cur, _ := p.get("g")
	stop := make(chan struct{})
	hold := func(w view.Watch) chan view.WatchAnswer {
		out := make(chan view.WatchAnswer, 1)
		go func() {
			a, err := holdWatch(context.Background(), stop, p, w)
			if err != nil {
				t.Error(err)
			}
			out <- a
		}()
		return out
	}
	select {
	case a := <-hold(view.Watch{Group: "g", Epoch: 3, WaitMs: 60_000}):
		if !a.Newer || a.Epoch != 4 || a.Seq != cur.View.Seq {
			t.Fatalf("a watch of epoch 3: %+v, want newer epoch 4", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a watch of an older view was held")
	}

	held := hold(view.Watch{Group: "g", Epoch: 4, Seq: cur.View.Seq, WaitMs: 60_000})
	select {
	case a := <-held:
		t.Fatalf("a watch of the published view answered before a publish: %+v", a)
	case <-time.After(50 * time.Millisecond):
	}
	p.set(view.View{Group: "g", Epoch: 5, IssuedAt: t0}) // the revoke
	select {
	case a := <-held:
		if !a.Newer || a.Epoch != 5 {
			t.Fatalf("after the publish: %+v, want newer epoch 5", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the publish did not release the held watch")
	}

	cur, _ = p.get("g")
	select {
	case a := <-hold(view.Watch{Group: "g", Epoch: 5, Seq: cur.View.Seq, WaitMs: 30}):
		if a.Newer {
			t.Fatalf("a watch whose wait ended: %+v, want not newer", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end the watch")
	}

	held = hold(view.Watch{Group: "g", Epoch: 5, Seq: cur.View.Seq, WaitMs: 60_000})
	close(stop)
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("a stopping daemon did not release the held watch")
	}

	body := []byte(`{"group":"g","site":"a","epoch":5,"seq":1,"waitMs":1000}`)
	if _, err := p.verifyWatch(body, view.SignBytes(body, []byte("forged"))); !errors.Is(err, api.ErrUnauthorized) {
		t.Fatalf("forged watch: %v, want ErrUnauthorized", err)
	}
	if w, err := p.verifyWatch(body, view.SignBytes(body, p.key)); err != nil || w.Epoch != 5 || w.Site != "a" {
		t.Fatalf("signed watch: %+v %v", w, err)
	}
}
