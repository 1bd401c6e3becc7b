package testenv

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every member's flags are the recommended my.cnf lines with every
// placeholder filled in (its own local address, the group's name, all
// seeds), and the harness's start-on-boot OFF comes after the
// recommendation's ON, so it wins.
func TestGroupReplicationArgsFillEveryPlaceholder(t *testing.T) {
	seeds := []string{"127.0.0.1:40001", "127.0.0.1:40002"}
	args := groupReplicationArgs("aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee", seeds[1], seeds)
	joined := strings.Join(args, " ")
	if strings.ContainsAny(joined, "<>#") {
		t.Fatalf("unfilled placeholder or comment in %q", args)
	}
	for _, want := range []string{"--group_replication_group_name=aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee",
		"--group_replication_local_address=127.0.0.1:40002", "--group_replication_group_seeds=127.0.0.1:40001,127.0.0.1:40002",
		"--plugin-load-add=group_replication.so", "--group_replication_consistency=BEFORE_ON_PRIMARY_FAILOVER", "--report-host=127.0.0.1"} {
		if !slices.Contains(args, want) {
			t.Errorf("missing %s in %q", want, args)
		}
	}
	on := slices.Index(args, "--group_replication_start_on_boot=ON")
	off := slices.Index(args, "--group-replication-start-on-boot=OFF")
	if on < 0 || off < on {
		t.Errorf("start on boot: ON at %d, OFF at %d; want OFF after ON", on, off)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(newUUID()) {
		t.Errorf("newUUID() = %q is no version 4 UUID", newUUID())
	}
}
