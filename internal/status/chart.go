package status

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// The chart's geometry, in the units of its viewBox: a band for the table's size above a band
// for the rows each run deleted, over one slot per run, oldest on the left.
const (
	chartWidth  = 320
	chartHeight = 132
	plotLeft    = 6
	plotRight   = 314
	sizeTop     = 8
	sizeBottom  = 82
	deletedTop  = 92
	deletedBase = 124
)

// chart is one table's history: a point per run that swept it.
type chart struct {
	Table  string
	Width  int
	Height int
	Points []point
	// SizeLine is the polyline through the points that have a size.
	SizeLine string
	// SizeBase, DeletedBase and the extents below draw the axes.
	SizeBase, DeletedBase, Left, Right int
	// Now, Change, MaxDeleted and TotalDeleted are the caption's numbers.
	Now          string
	Change       string
	MaxDeleted   int64
	TotalDeleted int64
}

// point is one run's mark: its table size (when measured) and a bar for its deleted rows.
type point struct {
	Title   string
	HasSize bool
	X, Y    float64
	BarX    float64
	BarY    float64
	BarW    float64
	BarH    float64
}

// sample is one run's reading of one table.
type sample struct {
	at      time.Time
	bytes   *int64
	rows    *int64
	deleted int64
}

// buildCharts returns a chart per table of specs, in catalog order, from the runs of every
// sweep. A run that swept a table more than once (two passes) is one point: its deleted rows
// summed, the size its last pass read.
func buildCharts(specs []policy.Spec, runs map[string][]wire.HistoryRun) []chart {
	var order []string
	samples := map[string][]sample{}
	for _, s := range specs {
		table := map[string]string{}
		for _, p := range s.Passes {
			table[p.Name] = p.Table
			if !slices.Contains(order, p.Table) {
				order = append(order, p.Table)
			}
		}
		for _, r := range runs[s.Name] {
			byTable := map[string]*sample{}
			var seen []string
			for _, hp := range r.Passes {
				t, ok := table[hp.Pass]
				if !ok {
					continue // a pass the policy no longer has
				}
				sm := byTable[t]
				if sm == nil {
					sm = &sample{at: r.StartedAt}
					byTable[t] = sm
					seen = append(seen, t)
				}
				sm.deleted += hp.Deleted
				if hp.TableBytes != nil {
					sm.bytes, sm.rows = hp.TableBytes, hp.TableRows
				}
			}
			for _, t := range seen {
				samples[t] = append(samples[t], *byTable[t])
			}
		}
	}
	out := make([]chart, 0, len(order))
	for _, t := range order {
		ss := samples[t]
		slices.SortStableFunc(ss, func(a, b sample) int { return a.at.Compare(b.at) })
		out = append(out, newChart(t, ss))
	}
	return out
}

// newChart lays out table's samples, oldest first. Both bands start at zero, so a table whose
// size holds shows a flat line at any size, and a growing one a slope in proportion.
func newChart(table string, ss []sample) chart {
	c := chart{Table: table, Width: chartWidth, Height: chartHeight, SizeBase: sizeBottom, DeletedBase: deletedBase,
		Left: plotLeft, Right: plotRight}
	var maxBytes int64
	var first, last *int64
	var lastRows *int64
	for _, s := range ss {
		if s.bytes != nil {
			maxBytes = max(maxBytes, *s.bytes)
			if first == nil {
				first = s.bytes
			}
			last, lastRows = s.bytes, s.rows
		}
		c.MaxDeleted = max(c.MaxDeleted, s.deleted)
		c.TotalDeleted += s.deleted
	}
	slot := float64(plotRight-plotLeft) / float64(max(len(ss), 1))
	var line []string
	for i, s := range ss {
		x := plotLeft + (float64(i)+0.5)*slot
		p := point{X: x, BarW: max(1, slot*0.6)}
		p.BarX = x - p.BarW/2
		if c.MaxDeleted > 0 {
			p.BarH = float64(s.deleted) / float64(c.MaxDeleted) * (deletedBase - deletedTop)
		}
		p.BarY = deletedBase - p.BarH
		title := []string{s.at.UTC().Format("2006-01-02 15:04:05Z")}
		if s.bytes != nil {
			p.HasSize = true
			p.Y = sizeBottom
			if maxBytes > 0 {
				p.Y = sizeBottom - float64(*s.bytes)/float64(maxBytes)*(sizeBottom-sizeTop)
			}
			line = append(line, fmt.Sprintf("%.1f,%.1f", p.X, p.Y))
			title = append(title, formatBytes(*s.bytes))
			if s.rows != nil && *s.rows >= 0 {
				title = append(title, "~"+formatCount(*s.rows)+" rows")
			}
		} else {
			title = append(title, "size not recorded")
		}
		title = append(title, formatCount(s.deleted)+" deleted")
		p.Title = strings.Join(title, " · ")
		c.Points = append(c.Points, p)
	}
	c.SizeLine = strings.Join(line, " ")
	if last != nil {
		c.Now = formatBytes(*last)
		if lastRows != nil && *lastRows >= 0 {
			c.Now += ", ~" + formatCount(*lastRows) + " rows"
		}
		if *first > 0 {
			c.Change = sizeChange(*first, *last)
		}
	}
	return c
}

// sizeChange says how far last is from first, in percent to a tenth: "no change" within that.
func sizeChange(first, last int64) string {
	pct := math.Round((float64(last)/float64(first)-1)*1000) / 10
	if pct == 0 {
		return "no change"
	}
	return fmt.Sprintf("%+.1f%%", pct)
}
