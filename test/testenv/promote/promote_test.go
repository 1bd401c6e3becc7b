package promote

import (
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/testenv"
)

// TestSiteMakesTheTopologySourceWritable: a topology starts with no
// writable site; Site promotes the source through mysqlctl, after which the
// application account writes there and the replica follows.
func TestSiteMakesTheTopologySourceWritable(t *testing.T) {
	testenv.ForEachEngine(t, testSiteMakesTheTopologySourceWritable)
}

func testSiteMakesTheTopologySourceWritable(t *testing.T, e testenv.Engine) {
	tp := testenv.StartTopology(t, 2, testenv.TopologyOptions{Engine: e})
	if p := tp.Primary(); p != nil {
		t.Fatalf("Primary() of a fresh topology = %v, want nil: sites start read-only", p)
	}
	Site(t, tp.Sites[0])
	Site(t, tp.Sites[0]) // promoting a writable site is a no-op
	if p := tp.Primary(); p != tp.Sites[0] {
		t.Fatalf("Primary() after Site(site0) = %v, want site0", p)
	}
	tp.Sites[0].Exec(t, "CREATE TABLE app.p (id INT PRIMARY KEY)")
	if _, err := tp.Sites[0].AppDB(t).Exec("INSERT INTO p VALUES (1)"); err != nil {
		t.Fatalf("app write on the promoted site: %v", err)
	}
	tp.WaitReplicated(t, 20*time.Second)
	if ro := tp.Sites[1].QueryString(t, "SELECT @@global.read_only"); ro != "1" {
		t.Fatalf("replica read_only = %s, want 1", ro)
	}
	if e == testenv.MySQL {
		if sro := tp.Sites[0].QueryString(t, "SELECT @@global.super_read_only"); sro != "0" {
			t.Fatalf("promoted MySQL site super_read_only = %s, want 0", sro)
		}
		if sro := tp.Sites[1].QueryString(t, "SELECT @@global.super_read_only"); sro != "1" {
			t.Fatalf("MySQL replica super_read_only = %s, want 1", sro)
		}
	}
}
