package check

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// cascades refuses a pass whose deletes change a table it does not name: every table an ON
// DELETE CASCADE, SET NULL or SET DEFAULT key reaches from it, recursively, must be in its
// cascades. Each is refused once, with the shortest chain and the ways out; a named table no key
// reaches is refused too, so that the list says no more than the pass deletes.
func (c *checker) cascades(ctx context.Context, sweep string, p policy.Pass) (findings, error) {
	var found findings
	if p.Mode == policy.ModePerRow || p.Mode == policy.ModePartitions {
		return found, nil
	}
	g, err := statement.ReadCascades(ctx, c.pool, p)
	if err != nil {
		return findings{}, fmt.Errorf("read cascading keys of %q: %w", p.Table, err)
	}
	named := map[uint32]bool{}
	for i, name := range p.Cascades {
		t, err := c.table(ctx, name)
		if err != nil {
			return findings{}, err
		}
		if t.problem != "" {
			found.refuse(c.problem(sweep, p.Name, fmt.Sprintf("cascades.%d", i), "cascades table %q %s", name, t.problem))
			continue
		}
		named[t.oid] = true
		if !slices.Contains(g.Reached(), t.oid) {
			found.refuse(c.problem(sweep, p.Name, fmt.Sprintf("cascades.%d", i), "cascades names table %q, which no ON DELETE CASCADE, SET NULL or SET DEFAULT key reaches from table %q: remove it",
				name, p.Table))
		}
	}
	refused := map[uint32]bool{}
	for i, e := range g.Edges {
		if named[e.TableOID] || refused[e.TableOID] {
			continue
		}
		refused[e.TableOID] = true
		chain := g.Chain(i)
		var tables []string
		for _, ce := range chain {
			if !named[ce.TableOID] && !slices.Contains(tables, ce.Table) {
				tables = append(tables, ce.Table)
			}
		}
		list := strings.Join(append(slices.Clone(p.Cascades), tables...), ", ")
		out := fmt.Sprintf("say that they go too with cascades: [%s]", list)
		if first := chain[0]; first.ParentOID == g.Root {
			out = fmt.Sprintf("keep the rows of %q that %s references with keep_while_referenced_by: [{table: %s, column: %s, references: %s}], or %s",
				p.Table, first.Table, first.Table, yamlList(first.Columns), yamlList(first.Refs), out)
		}
		verb := "deletes rows of"
		if !e.Deletes() {
			verb = "changes rows of"
		}
		found.refuse(c.problem(sweep, p.Name, "cascades", "deleting from table %q %s table %q, which the pass does not name, through the schema's ON DELETE keys: %s (key %s); %s",
			p.Table, verb, e.Table, statement.ChainText(chain), e.Key, out))
	}
	return found, nil
}

// deleteTriggers lists, as a warning, the user triggers that fire on DELETE on the tables the
// pass's statement deletes from: they run for every row it deletes (a BEFORE trigger returning
// NULL keeps the row, and the batch counts it as kept), and may write elsewhere. Not refused:
// the schema's owners put them there; the operator should see them.
func (c *checker) deleteTriggers(ctx context.Context, sweep string, p policy.Pass) (findings, error) {
	var found findings
	if p.Mode == policy.ModePerRow || p.Mode == policy.ModePartitions {
		return found, nil
	}
	tables := []string{p.Table}
	for _, ch := range p.DeleteWith {
		tables = append(tables, ch.Table)
	}
	triggers, err := statement.ReadDeleteTriggers(ctx, c.pool, tables)
	if err != nil {
		return findings{}, err
	}
	if len(triggers) > 0 {
		found.warn(c.problem(sweep, p.Name, "", "the pass's deletes fire triggers %s: each runs for every row deleted, in the batch's transaction",
			strings.Join(triggers, ", ")))
	}
	return found, nil
}
