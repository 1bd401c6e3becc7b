package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/failoverd/failoverd/configs"
)

const (
	// defaultBackoff is the pause before the first webhook retry; it
	// doubles after each retry, all within the hook's Timeout.
	defaultBackoff = 200 * time.Millisecond
	// maxErrBody caps how much of a failed answer's body Result.Err quotes.
	maxErrBody = 200
	// maxDrain caps how much of an answer is read, so that a receiver
	// streaming forever cannot hold the hook until its timeout for nothing.
	maxDrain = 64 << 10
	// HeaderEvent names the event of a webhook call.
	HeaderEvent = "X-Failoverd-Event"
)

// errPermanent marks a webhook answer that a retry cannot change.
var errPermanent = errors.New("not retried")

func newHTTPClient() *http.Client {
	return &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		// A 301/302/303 would turn the POST into a GET without the payload:
		// report it instead of delivering nothing. 307/308 keep the POST.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.Method != http.MethodPost {
				return http.ErrUseLastResponse
			}
			if len(via) >= 5 {
				return fmt.Errorf("stopped after %d redirects", len(via))
			}
			return nil
		},
	}
}

// runWebhook POSTs payload to h.URL, retrying a failed call (no answer, 5xx,
// 408, 429, 3xx) up to h.Retries times with a doubling backoff, all within
// ctx. It returns the number of calls made.
func (r *Runner) runWebhook(ctx context.Context, h configs.Hook, event string, payload []byte, log *slog.Logger, onAttempt func(int)) (int, error) {
	backoff := r.backoff
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return attempt - 1, fmt.Errorf("not started: %w", err)
		}
		onAttempt(attempt)
		err := r.post(ctx, h.URL, event, payload)
		if err == nil {
			return attempt, nil
		}
		err = fmt.Errorf("%w: call %d of %d: %w", ErrFailed, attempt, h.Retries+1, err)
		if errors.Is(err, errPermanent) || attempt > h.Retries || ctx.Err() != nil {
			return attempt, err
		}
		log.Warn("hook.retrying", "attempt", attempt, "err", err, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return attempt, fmt.Errorf("%w (no time left to retry)", err)
		case <-t.C:
		}
		backoff *= 2
	}
}

// post makes one call; the error wraps errPermanent when a retry cannot
// help.
func (r *Runner) post(ctx context.Context, target, event string, payload []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("build request: %w (%w)", err, errPermanent)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "failoverd-hooks")
	req.Header.Set(HeaderEvent, event)
	resp, err := r.client.Do(req)
	if err != nil {
		// The URL in url.Error may carry credentials: name the redacted one.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("POST %s: %w", redactURL(target), err)
	}
	defer func() { _ = resp.Body.Close() }()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	err = fmt.Errorf("POST %s: %s: %q", redactURL(target), resp.Status, strings.TrimSpace(string(head)))
	// A 4xx (other than timeout and rate limit) or a redirect that was not
	// followed will be answered the same way again.
	if (code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests) ||
		(code >= 300 && code < 400) {
		return fmt.Errorf("%w (%w)", err, errPermanent)
	}
	return err
}

// redactURL drops the password and the query (which often holds a token)
// from a URL for logs and Result.Err.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.RawQuery != "" {
		u.RawQuery = "..."
	}
	u.Fragment = ""
	return u.Redacted()
}
