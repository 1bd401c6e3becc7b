package poller

import (
	"net"
	"strconv"
	"strings"
)

// Site is one server to probe.
type Site struct {
	// Name is the site's unique name within its group.
	Name string
	// Addr is "host:port" as the daemon dials it.
	Addr string
	// ReplicationAddr is "host:port" as other sites' replicas dial it; ""
	// means Addr.
	ReplicationAddr string
}

// addressBook maps a normalized "host:port" to the site it belongs to; ""
// marks an address claimed by two sites (ambiguous, so mapped to nobody).
type addressBook map[string]string

func newAddressBook(sites []Site) addressBook {
	b := addressBook{}
	for _, s := range sites {
		for _, a := range []string{s.Addr, s.ReplicationAddr} {
			host, port, err := net.SplitHostPort(a)
			if a == "" || err != nil {
				continue
			}
			key := addrKey(host, port)
			if prev, ok := b[key]; ok && prev != s.Name {
				// Two sites behind one address: following it proves nothing
				// about either, so it must not make a replica a witness.
				b[key] = ""
				continue
			}
			b[key] = s.Name
		}
	}
	return b
}

// lookup returns the site whose address is host:port, or "".
func (b addressBook) lookup(host string, port int) string {
	if host == "" {
		return ""
	}
	return b[addrKey(host, strconv.Itoa(port))]
}

// addrKey normalizes an address: host names are case-insensitive and IPv6
// literals may come with or without brackets.
func addrKey(host, port string) string {
	return net.JoinHostPort(strings.ToLower(strings.Trim(host, "[]")), port)
}
