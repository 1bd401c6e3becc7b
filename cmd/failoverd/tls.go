package main

import (
	"net/http"

	"github.com/failoverd/failoverd/configs"
)

// httpClient is an HTTP client for the daemon's API: with caFile it trusts
// that CA for https:// URLs (the system pool otherwise), and with certFile
// and keyFile it presents a client certificate (daemon.tls.clientCAFile).
func httpClient(caFile, certFile, keyFile string) (*http.Client, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return &http.Client{}, nil
	}
	cfg, err := configs.ClientTLS(caFile, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return &http.Client{Transport: tr}, nil
}
