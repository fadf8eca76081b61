package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// writeVerdicts prints, under the history, each sweep's retention verdict as GET /internal/sweeps
// judges it (only sweep's, when set), after the summary line the status page opens with. An API
// that cannot judge is said in a line: the history above is printed either way.
func writeVerdicts(ctx context.Context, w io.Writer, cl *client, sweep string) error {
	in := cl.do(ctx, http.MethodGet, catalogPath, nil).in
	var cat wire.Catalog
	var reason string
	switch {
	case in.TransportErr != nil:
		reason = in.TransportErr.Error()
	case in.StatusCode < 200 || in.StatusCode > 299:
		reason = fmt.Sprintf("HTTP %d", in.StatusCode)
	default:
		if err := json.Unmarshal(in.Body, &cat); err != nil {
			reason = err.Error()
		}
	}
	if reason != "" {
		_, err := fmt.Fprintf(w, "\nretention: GET %s: %s\n", catalogPath, reason)
		return err
	}
	return formatVerdicts(w, cat.Sweeps, sweep)
}

// formatVerdicts is the verdicts' table: the summary line, then one line per sweep (only's
// alone, when set); nothing when the API judged none.
func formatVerdicts(w io.Writer, sweeps []wire.CatalogSweep, only string) error {
	if len(sweeps) == 0 {
		return nil
	}
	var verdicts []wire.Verdict
	rows := [][]string{{"SWEEP", "VERDICT", "LAG", "CATCH-UP", "WHY"}}
	for _, s := range sweeps {
		if s.Retention == nil {
			return nil // an API without a run history judges nothing
		}
		verdicts = append(verdicts, s.Retention.Verdict)
		if only != "" && s.Name != only {
			continue
		}
		v := s.Retention
		lag, eta := "-", "-"
		if v.LagSeconds != nil {
			lag = (time.Duration(*v.LagSeconds) * time.Second).String()
		}
		if v.CatchUpAt != nil {
			eta = v.CatchUpAt.UTC().Format(time.RFC3339)
		}
		rows = append(rows, []string{s.Name, string(v.Verdict), lag, eta, v.Reason})
	}
	var b strings.Builder
	b.WriteString("\nretention: " + wire.Summary(verdicts) + "\n")
	writeColumns(&b, rows)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeColumns writes rows padded to their columns' widths, the last column as it is.
func writeColumns(b *strings.Builder, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	for _, row := range rows {
		for i, cell := range row {
			if i == len(row)-1 {
				b.WriteString(cell)
				break
			}
			b.WriteString(cell + strings.Repeat(" ", widths[i]-len([]rune(cell))+2))
		}
		b.WriteString("\n")
	}
}
