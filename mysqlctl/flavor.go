package mysqlctl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/failoverd/failoverd/gtid"
)

// Distribution names reported in Flavor.Distribution.
const (
	DistMySQL   = "MySQL"
	DistPercona = "Percona Server"
	DistMariaDB = "MariaDB"
)

// Oldest supported versions: MySQL 8.0.23 is the first release with the
// complete REPLICA/SOURCE syntax (CHANGE REPLICATION SOURCE TO); MariaDB
// 10.11 is the oldest LTS this project tests against.
var (
	minMySQL   = version{8, 0, 23}
	minMariaDB = version{10, 11, 0}
)

// version is a numeric major.minor.patch triple.
type version struct{ major, minor, patch int }

func (v version) less(o version) bool {
	if v.major != o.major {
		return v.major < o.major
	}
	if v.minor != o.minor {
		return v.minor < o.minor
	}
	return v.patch < o.patch
}

// Flavor identifies the engine and version of a server, detected from
// SELECT @@version, @@version_comment.
type Flavor struct {
	// Engine is gtid.MySQL (Oracle MySQL and Percona Server) or gtid.MariaDB;
	// it is also the flavor of every GTID set the server reports.
	Engine gtid.Flavor
	// Distribution is DistMySQL, DistPercona or DistMariaDB.
	Distribution string
	// Major, Minor and Patch are the numeric server version.
	Major, Minor, Patch int
	// Version and VersionComment are @@version and @@version_comment as read.
	Version, VersionComment string
}

// String returns e.g. "MariaDB 10.11.19" or "Percona Server 8.0.36".
func (f Flavor) String() string {
	return fmt.Sprintf("%s %d.%d.%d", f.Distribution, f.Major, f.Minor, f.Patch)
}

// AtLeast reports whether the server version is major.minor.patch or newer.
func (f Flavor) AtLeast(major, minor, patch int) bool {
	return !f.version().less(version{major, minor, patch})
}

func (f Flavor) version() version { return version{f.Major, f.Minor, f.Patch} }

// ParseFlavor detects the flavor from @@version and @@version_comment. It
// returns an error wrapping ErrUnsupportedVersion for MySQL older than 8.0.23,
// MariaDB older than 10.11, or a version it cannot read.
func ParseFlavor(versionStr, comment string) (Flavor, error) {
	f := Flavor{Version: versionStr, VersionComment: comment}
	v := strings.TrimSpace(versionStr)
	lower := strings.ToLower(v)
	if strings.Contains(lower, "mariadb") {
		f.Engine, f.Distribution = gtid.MariaDB, DistMariaDB
		// Some proxies and old servers prefix the real version with the
		// replication-protocol marker "5.5.5-".
		v = strings.TrimPrefix(v, "5.5.5-")
	} else {
		f.Engine, f.Distribution = gtid.MySQL, DistMySQL
		if strings.Contains(strings.ToLower(comment), "percona") {
			f.Distribution = DistPercona
		}
	}
	num, ok := parseVersionNumber(v)
	if !ok {
		return Flavor{}, fmt.Errorf("%w: cannot read version %q (%q)", ErrUnsupportedVersion, versionStr, comment)
	}
	f.Major, f.Minor, f.Patch = num.major, num.minor, num.patch
	minimum := minMySQL
	if f.Engine == gtid.MariaDB {
		minimum = minMariaDB
	}
	if num.less(minimum) {
		return Flavor{}, fmt.Errorf("%w: %s (%q) is older than %d.%d.%d",
			ErrUnsupportedVersion, f, versionStr, minimum.major, minimum.minor, minimum.patch)
	}
	return f, nil
}

// parseVersionNumber reads the leading "major.minor.patch" of s.
func parseVersionNumber(s string) (version, bool) {
	end := 0
	for end < len(s) && (s[end] == '.' || ('0' <= s[end] && s[end] <= '9')) {
		end++
	}
	parts := strings.Split(s[:end], ".")
	if len(parts) < 3 {
		return version{}, false
	}
	var n [3]int
	for i := range n {
		x, err := strconv.Atoi(parts[i])
		if err != nil {
			return version{}, false
		}
		n[i] = x
	}
	return version{n[0], n[1], n[2]}, true
}
