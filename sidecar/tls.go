package sidecar

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/failoverd/failoverd/configs"
)

// PeerTLSFiles are the files of TLS on the peer links (--peer-ca-file,
// --peer-cert-file, --peer-key-file): all three or none. Every sidecar of
// a group must use them alike, since peers are dialled with https:// then.
type PeerTLSFiles struct {
	// CAFile verifies the peers' certificates.
	CAFile string
	// CertFile and KeyFile are this sidecar's certificate, served on its
	// listener; it must name the host of sites[S].sidecar.address, which
	// the peers dial.
	CertFile, KeyFile string
}

// Load returns the TLS configuration to serve with (Options.ServerTLS) and
// the HTTPS client for the peers (Options.PeerHTTPClient); nil and nil
// when no file is set. It reports every problem at once.
func (f PeerTLSFiles) Load() (*tls.Config, *http.Client, error) {
	if f == (PeerTLSFiles{}) {
		return nil, nil, nil
	}
	var errs []error
	for _, m := range []struct{ flag, file string }{{"--peer-ca-file", f.CAFile}, {"--peer-cert-file", f.CertFile}, {"--peer-key-file", f.KeyFile}} {
		if m.file == "" {
			errs = append(errs, fmt.Errorf("%w: peer TLS: %s is missing: set --peer-ca-file, --peer-cert-file and --peer-key-file together", ErrInvalidConfig, m.flag))
		}
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	pair, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		errs = append(errs, fmt.Errorf("%w: peer TLS: --peer-cert-file %s / --peer-key-file %s: %v", ErrInvalidConfig, f.CertFile, f.KeyFile, err))
	}
	client, err := configs.ClientTLS(f.CAFile, "", "")
	if err != nil {
		errs = append(errs, fmt.Errorf("%w: peer TLS: --peer-ca-file: %v", ErrInvalidConfig, err))
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = client
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, &http.Client{Transport: tr}, nil
}

// PeersOverTLS makes every http:// peer URL https:// (the peers serve TLS).
func (c *Config) PeersOverTLS() {
	for i, p := range c.Peers {
		if rest, ok := strings.CutPrefix(p.URL, "http://"); ok {
			c.Peers[i].URL = "https://" + rest
		}
	}
}
