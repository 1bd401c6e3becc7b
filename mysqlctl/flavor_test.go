package mysqlctl

import (
	"errors"
	"testing"

	"github.com/failoverd/failoverd/gtid"
)

func TestParseFlavor(t *testing.T) {
	tests := []struct {
		version, comment string
		wantEngine       gtid.Flavor
		wantDist         string
		wantVer          [3]int
		unsupported      bool
	}{
		{"8.0.23", "MySQL Community Server - GPL", gtid.MySQL, DistMySQL, [3]int{8, 0, 23}, false},
		{"8.0.36-log", "MySQL Community Server - GPL", gtid.MySQL, DistMySQL, [3]int{8, 0, 36}, false},
		{"8.4.2", "MySQL Community Server - GPL", gtid.MySQL, DistMySQL, [3]int{8, 4, 2}, false},
		{"9.1.0-commercial", "MySQL Enterprise Server - Commercial", gtid.MySQL, DistMySQL, [3]int{9, 1, 0}, false},
		{"8.0.36-28", "Percona Server (GPL), Release 28, Revision 47601f19", gtid.MySQL, DistPercona, [3]int{8, 0, 36}, false},
		{"8.4.3-3", "Percona Server (GPL), Release 3, Revision 2ef7de8b", gtid.MySQL, DistPercona, [3]int{8, 4, 3}, false},
		{"10.11.19-MariaDB-0+deb12u1-log", "Debian 12", gtid.MariaDB, DistMariaDB, [3]int{10, 11, 19}, false},
		{"11.4.2-MariaDB", "mariadb.org binary distribution", gtid.MariaDB, DistMariaDB, [3]int{11, 4, 2}, false},
		{"5.5.5-10.11.6-MariaDB", "MariaDB Server", gtid.MariaDB, DistMariaDB, [3]int{10, 11, 6}, false},
		// Too old.
		{"8.0.22", "MySQL Community Server - GPL", gtid.MySQL, DistMySQL, [3]int{}, true},
		{"5.7.44-log", "MySQL Community Server (GPL)", gtid.MySQL, DistMySQL, [3]int{}, true},
		{"5.7.44-48", "Percona Server (GPL), Release 48", gtid.MySQL, DistPercona, [3]int{}, true},
		{"10.6.16-MariaDB", "MariaDB Server", gtid.MariaDB, DistMariaDB, [3]int{}, true},
		{"10.5.23-MariaDB-log", "MariaDB Server", gtid.MariaDB, DistMariaDB, [3]int{}, true},
		// Unreadable.
		{"", "", 0, "", [3]int{}, true},
		{"eight", "MySQL", 0, "", [3]int{}, true},
		{"8.0", "MySQL", 0, "", [3]int{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			f, err := ParseFlavor(tt.version, tt.comment)
			if tt.unsupported {
				if !errors.Is(err, ErrUnsupportedVersion) {
					t.Fatalf("ParseFlavor(%q) = %+v, %v; want ErrUnsupportedVersion", tt.version, f, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseFlavor(%q): %v", tt.version, err)
			}
			if f.Engine != tt.wantEngine || f.Distribution != tt.wantDist || [3]int{f.Major, f.Minor, f.Patch} != tt.wantVer {
				t.Fatalf("ParseFlavor(%q) = %v %s %d.%d.%d; want %v %s %v", tt.version, f.Engine, f.Distribution, f.Major, f.Minor, f.Patch, tt.wantEngine, tt.wantDist, tt.wantVer)
			}
			if f.Version != tt.version || f.VersionComment != tt.comment {
				t.Fatalf("raw strings not kept: %+v", f)
			}
		})
	}
}

func TestFlavorAtLeast(t *testing.T) {
	f := mustFlavor("8.0.26", "MySQL")
	for _, tt := range []struct {
		v    [3]int
		want bool
	}{
		{[3]int{8, 0, 25}, true}, {[3]int{8, 0, 26}, true}, {[3]int{8, 0, 27}, false},
		{[3]int{8, 1, 0}, false}, {[3]int{7, 9, 99}, true}, {[3]int{9, 0, 0}, false},
	} {
		if got := f.AtLeast(tt.v[0], tt.v[1], tt.v[2]); got != tt.want {
			t.Errorf("8.0.26.AtLeast(%v) = %t, want %t", tt.v, got, tt.want)
		}
	}
}
