package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/failoverd/failoverd/status"
)

func newHistoryCmd(c *cli) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "history GROUP",
		Short: "Show GROUP's latest failovers and switchovers with their timelines, and operator requests",
		Long: `history asks the leading daemon (--server; a follower forwards the request)
for GROUP's history, oldest first: the latest 50 failovers and switchovers,
completed, abandoned (with the decision that ended it) or in flight, and the
latest 50 operator requests (switchover, acknowledge, confirm-fence, reclone,
...) with who asked and the result.

Each failover or switchover shows its kind, old and new primary, epochs,
who asked (switchover), the fence proof its promotion rested on, the
promotion GTID, and its timeline: every step it reached (detected or
requested, cache-moved, revoked, old-primary-fenced, fenced, relay-drained,
promotion-recorded, published, writable, promoted, repointed, routed) with
the daemon's time and the time since the previous step and since the first.
-o json or yaml prints the API's document (GET /v1/groups/GROUP/history).

Exit codes: 0 printed, 1 the daemon answered with an error (unknown group,
no leader known), 2 bad flags, 3 no answer from the daemon.`,
		Args:              namedArgs("GROUP"),
		ValidArgsFunction: c.completeArgs("GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" && output != "yaml" {
				return &exitError{code: exitUsage, err: fmt.Errorf("-o %q: write table, json or yaml", output)}
			}
			cl, err := c.client(cmd, false)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			h, err := cl.History(ctx, args[0])
			if err != nil {
				return apiError(err)
			}
			if output != "table" {
				return writeDoc(c.stdout, h, output)
			}
			writeHistory(c.stdout, h)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	addServerFlags(cmd)
	return cmd
}

// writeDoc prints doc as indented JSON, or as YAML with the API's keys.
func writeDoc(w io.Writer, doc any, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	var generic any
	if err := yaml.Unmarshal(b, &generic); err != nil {
		return err
	}
	out, err := yaml.Marshal(generic)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// writeHistory prints h oldest first: a line per operator request, a
// header and a timeline table per failover or switchover.
func writeHistory(w io.Writer, h status.History) {
	actions, requests := 0, 0
	for _, e := range h.Entries {
		if e.Failover != nil {
			actions++
		} else {
			requests++
		}
	}
	if len(h.Entries) == 0 {
		fmt.Fprintf(w, "HISTORY %s: no failover, switchover or operator request recorded\n", h.Group)
		return
	}
	fmt.Fprintf(w, "HISTORY %s (oldest first): %d failover(s) or switchover(s), %d operator request(s)\n", h.Group, actions, requests)
	for _, e := range h.Entries {
		fmt.Fprintln(w)
		when := e.At.UTC().Format(time.RFC3339)
		if a := e.Action; a != nil {
			site := ""
			if a.Site != "" {
				site = " " + a.Site
			}
			fmt.Fprintf(w, "%s  request %s%s by %s: %s\n", when, a.Action, site, orDash(a.By), a.Result)
			continue
		}
		writeFailover(w, when, e.Failover)
	}
}

func writeFailover(w io.Writer, when string, f *status.FailoverRecord) {
	from := orDash(f.From)
	took := seconds(f.TookSeconds)
	switch f.Outcome {
	case status.OutcomeCompleted:
		fmt.Fprintf(w, "%s  %s %s  %s → %s  completed at epoch %d in %s\n", when, f.Kind, f.ID, from, f.To, f.Epoch, took)
	case status.OutcomeAbandoned:
		fmt.Fprintf(w, "%s  %s %s  %s → %s  ABANDONED at epoch %d after %s: %s\n", when, f.Kind, f.ID, from, f.To, f.Epoch, took, f.Why)
	default:
		fmt.Fprintf(w, "%s  %s %s  %s → %s  %s for %s\n", when, f.Kind, f.ID, from, f.To, strings.ToUpper(f.Outcome), took)
	}
	var details []string
	if f.By != "" {
		details = append(details, "asked by "+f.By)
	}
	if f.Reason != "" {
		details = append(details, "reason "+f.Reason)
	}
	details = append(details, fmt.Sprintf("revoked epoch %d", f.RevokedEpoch))
	if f.Proof != "" {
		p := "proof " + f.Proof
		if f.ConfirmedBy != "" {
			p += " (confirmed by " + f.ConfirmedBy + ")"
		}
		details = append(details, p)
	}
	if f.PromotionGTID != "" {
		details = append(details, "promotion GTID "+truncate(f.PromotionGTID, 80))
	}
	if f.RevokedToWritableSeconds > 0 {
		details = append(details, "revoked to writable "+seconds(f.RevokedToWritableSeconds))
	}
	fmt.Fprintf(w, "  %s\n", strings.Join(details, ", "))
	if len(f.Timeline) == 0 {
		fmt.Fprintln(w, "  (no timeline: recorded before failoverd kept one)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  STEP\tAT\t+PREVIOUS\t+START")
	for i, s := range f.Timeline {
		prev, start := "-", "-"
		if i > 0 {
			prev, start = seconds(s.SincePreviousSeconds), seconds(s.SinceStartSeconds)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", s.Step, s.At.UTC().Format("15:04:05.000Z"), prev, start)
	}
	_ = tw.Flush() // a failed write to stdout has nowhere better to go
}

// seconds prints a duration in seconds to the millisecond (12ms, 1.234s).
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}
