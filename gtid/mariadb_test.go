package gtid

import "testing"

// TestMariaDBScenarios walks through the failover situations the MariaDB model
// must get right, using @@gtid_binlog_state values as the poller reads them.
func TestMariaDBScenarios(t *testing.T) {
	tests := []struct {
		name string
		// primary and replica binlog states
		primary, replica string
		// replicaContained: primary ⊇ replica (safe to repoint replica under primary)
		replicaContained bool
		// errant: replica − primary, the transactions only the replica has
		errant string
		// missing: primary − replica, what the replica still has to apply
		missing string
	}{
		{name: "caught-up replica", primary: "0-1-100", replica: "0-1-100",
			replicaContained: true},
		{name: "lagging replica", primary: "0-1-100", replica: "0-1-90",
			replicaContained: true, missing: "0-1-91..100"},
		{name: "fresh replica, empty state", primary: "0-1-100", replica: "",
			replicaContained: true, missing: "0-1-100"},
		{name: "errant transaction on replica", primary: "0-1-100", replica: "0-1-100,0-3-101",
			errant: "0-3-101"},
		{name: "errant transaction on lagging replica", primary: "0-1-100", replica: "0-1-90,0-3-91",
			errant: "0-3-91", missing: "0-1-91..100"},
		{name: "new server id after legitimate failover", primary: "0-1-50,0-2-100", replica: "0-1-50,0-2-80",
			replicaContained: true, missing: "0-2-81..100"},
		{name: "old primary rejoins after failover", primary: "0-1-50,0-2-100", replica: "0-1-50",
			replicaContained: true, missing: "0-2-100"},
		{name: "old primary wrote unreplicated transactions", primary: "0-1-50,0-2-100", replica: "0-1-52",
			errant: "0-1-51..52", missing: "0-2-100"},
		{name: "second failover back to server 1", primary: "0-1-150,0-2-100", replica: "0-1-50,0-2-100",
			replicaContained: true, missing: "0-1-51..150"},
		{name: "several domains, all behind", primary: "0-1-100,1-1-40", replica: "0-1-90,1-1-40",
			replicaContained: true, missing: "0-1-91..100"},
		{name: "domains are independent: ahead in one does not cover behind in another", primary: "0-1-100,1-1-40", replica: "0-1-90,1-1-45",
			errant: "1-1-41..45", missing: "0-1-91..100"},
		{name: "replica-only domain is errant", primary: "0-1-100", replica: "0-1-100,5-3-1",
			errant: "5-3-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, r := MustParse(MariaDB, tt.primary), MustParse(MariaDB, tt.replica)
			if got := p.Contains(r); got != tt.replicaContained {
				t.Errorf("primary.Contains(replica) = %v, want %v", got, tt.replicaContained)
			}
			if got := r.Subtract(p).String(); got != tt.errant {
				t.Errorf("replica − primary = %q, want %q", got, tt.errant)
			}
			if got := p.Subtract(r).String(); got != tt.missing {
				t.Errorf("primary − replica = %q, want %q", got, tt.missing)
			}
			if got, want := Comparable(p, r), tt.errant == "" || tt.missing == ""; got != want {
				t.Errorf("Comparable = %v, want %v", got, want)
			}
		})
	}
}

// TestMariaDBPositionVersusBinlogState documents why the poller must compare
// binlog states: a one-triple-per-domain position lacks the older servers'
// triples and so is not contained in a binlog state that has them.
func TestMariaDBPositionVersusBinlogState(t *testing.T) {
	state := MustParse(MariaDB, "0-1-50,0-2-100") // @@gtid_binlog_state of the new primary
	pos := MustParse(MariaDB, "0-2-100")          // its @@gtid_current_pos
	if !state.Contains(pos) {
		t.Error("binlog state must contain the position of the same server")
	}
	replicaState := MustParse(MariaDB, "0-1-50,0-2-90")
	if pos.Contains(replicaState) {
		t.Error("a position cannot vouch for the older server's triple in a binlog state")
	}
	if !state.Contains(replicaState) {
		t.Error("binlog state must contain the lagging replica's binlog state")
	}
}
