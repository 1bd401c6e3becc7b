package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/failoverd/failoverd/configs"
)

// httpClient is an HTTP client for the daemon's API: with caFile it trusts
// that CA for https:// URLs (the system pool otherwise), and with certFile
// and keyFile it presents a client certificate (daemon.tls.clientCAFile).
func httpClient(caFile, certFile, keyFile string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" || certFile != "" || keyFile != "" {
		cfg, err := configs.ClientTLS(caFile, certFile, keyFile)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = cfg
	}
	if certFile != "" {
		return &http.Client{Transport: tr}, nil
	}
	return &http.Client{Transport: certHint{tr}}, nil
}

// certHint names the missing client certificate when an https daemon hangs
// up on a client that presented none: with TLS 1.3 the server's refusal
// arrives after the client's handshake ended, so the client often sees only
// a broken pipe, a reset or a failed HTTP/2 preface instead of
// "certificate required".
type certHint struct{ next http.RoundTripper }

func (h certHint) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(req)
	if err != nil && req.URL.Scheme == "https" && !dialOrVerifyError(err) {
		err = fmt.Errorf("%w (the daemon may require a client certificate, daemon.tls.clientCAFile: pass --cert-file and --key-file)", err)
	}
	return resp, err
}

// dialOrVerifyError: the connection was never made (the error names the
// address) or the daemon's own certificate was refused (it names that).
func dialOrVerifyError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname)
}
