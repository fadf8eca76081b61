package statement

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// Cascades: the schema's own ON DELETE CASCADE, SET NULL and SET DEFAULT keys change other
// tables when a pass deletes. ReadCascades walks them from the tables a pass deletes from,
// following each CASCADE; the policy check refuses a graph reaching a table cascades does not
// name, and the dry run counts what each would lose (CascadeCount).

// Edge is one foreign key whose ON DELETE action changes the referencing rows when a row it
// references is deleted.
type Edge struct {
	// Key is the constraint's name.
	Key string
	// Parent is the referenced table, Table the referencing one, as the search_path shows them,
	// with their oids.
	Parent, Table       string
	ParentOID, TableOID uint32
	// Qualified is the referencing table as statements name it, schema.name, resolved by oid.
	Qualified string
	// Columns are the referencing columns, Refs the referenced ones, in key order.
	Columns, Refs []string
	// Action is CASCADE, SET NULL or SET DEFAULT.
	Action string
}

// Deletes says whether the key deletes the referencing rows (CASCADE) rather than changing them.
func (e Edge) Deletes() bool { return e.Action == "CASCADE" }

// Graph is the cascading keys a pass's deletes reach.
type Graph struct {
	// Root is the swept table's oid; Children the delete_with tables', in policy order.
	Root     uint32
	Children []uint32
	// Edges are the keys reached, breadth first: the first edge into a table is on the shortest
	// chain to it.
	Edges []Edge
}

// Chain is the keys from a table the pass deletes from to edge i, the first edge into each
// table on the way: the chain a policy check shows.
func (g *Graph) Chain(i int) []Edge {
	chain := []Edge{g.Edges[i]}
	for {
		first := chain[0]
		if first.ParentOID == g.Root || slices.Contains(g.Children, first.ParentOID) {
			return chain
		}
		j := slices.IndexFunc(g.Edges, func(e Edge) bool { return e.TableOID == first.ParentOID && e.Deletes() })
		if j < 0 || slices.ContainsFunc(chain, func(e Edge) bool { return e.Key == g.Edges[j].Key && e.TableOID == g.Edges[j].TableOID }) {
			return chain
		}
		chain = append([]Edge{g.Edges[j]}, chain...)
	}
}

// Reached are the oids of the tables the edges change, each once, in the order first reached.
func (g *Graph) Reached() []uint32 {
	var out []uint32
	for _, e := range g.Edges {
		if !slices.Contains(out, e.TableOID) {
			out = append(out, e.TableOID)
		}
	}
	return out
}

// ReadCascades reads the graph of pass p's cascading keys. A key from the swept table that an
// unconditional keep guard covers (the same single column pair) never fires, since a referenced
// row is kept; nor does one a delete_with child covers, since the statement deletes the
// referencing rows itself. A partition's copy of a referencing table's key is left out, as the
// policy check leaves it out of the blocking keys.
func ReadCascades(ctx context.Context, pool *pgxpool.Pool, p policy.Pass) (*Graph, error) {
	oidOf := func(name string) (uint32, error) {
		var oid *uint32
		if err := pool.QueryRow(ctx, `SELECT to_regclass($1)::oid`, QuoteName(name)).Scan(&oid); err != nil {
			return 0, fmt.Errorf("look up table %q: %w", name, err)
		}
		if oid == nil {
			return 0, fmt.Errorf("table %q does not exist", name)
		}
		return *oid, nil
	}
	g := &Graph{}
	var err error
	if g.Root, err = oidOf(p.Table); err != nil {
		return nil, err
	}
	// covered are the keys from the swept table that never fire: table oid, and its column
	// pairs in any order (pairKey).
	type pair struct {
		oid uint32
		key string
	}
	var covered []pair
	for _, gd := range p.Guards {
		if gd.Where != "" {
			continue
		}
		oid, err := oidOf(gd.Table)
		if err != nil {
			return nil, err
		}
		covered = append(covered, pair{oid, pairKey(gd.Columns, policy.Refs(gd.References))})
	}
	for _, c := range p.DeleteWith {
		oid, err := oidOf(c.Table)
		if err != nil {
			return nil, err
		}
		g.Children = append(g.Children, oid)
		covered = append(covered, pair{oid, pairKey(c.Columns, policy.Refs(c.References))})
	}
	queue := append([]uint32{g.Root}, g.Children...)
	seen := slices.Clone(queue)
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		edges, err := cascadeKeys(ctx, pool, from)
		if err != nil {
			return nil, err
		}
		for _, e := range edges {
			if from == g.Root && slices.Contains(covered, pair{e.TableOID, pairKey(e.Columns, e.Refs)}) {
				continue
			}
			g.Edges = append(g.Edges, e)
			if e.Deletes() && !slices.Contains(seen, e.TableOID) {
				seen = append(seen, e.TableOID)
				queue = append(queue, e.TableOID)
			}
		}
	}
	return g, nil
}

// cascadeKeys reads the keys referencing table oid whose ON DELETE changes the referencing rows.
func cascadeKeys(ctx context.Context, pool *pgxpool.Pool, oid uint32) ([]Edge, error) {
	rows, err := pool.Query(ctx, `
SELECT con.conname, con.confrelid::regclass::text, con.confrelid, con.conrelid::regclass::text, con.conrelid,
       (SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = con.conrelid),
       ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY AS k(n, i)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.i),
       ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY AS k(n, i)
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.i),
       CASE con.confdeltype WHEN 'c' THEN 'CASCADE' WHEN 'n' THEN 'SET NULL' ELSE 'SET DEFAULT' END
FROM pg_constraint con
WHERE con.contype = 'f' AND con.confrelid = $1 AND con.confdeltype IN ('c', 'n', 'd')
  AND NOT EXISTS (SELECT 1 FROM pg_constraint pc WHERE pc.oid = con.conparentid AND pc.confrelid = con.confrelid)
ORDER BY con.conrelid::regclass::text, con.conname`, oid)
	if err != nil {
		return nil, fmt.Errorf("read cascading foreign keys: %w", err)
	}
	edges, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Edge, error) {
		var e Edge
		err := r.Scan(&e.Key, &e.Parent, &e.ParentOID, &e.Table, &e.TableOID, &e.Qualified, &e.Columns, &e.Refs, &e.Action)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read cascading foreign keys: %w", err)
	}
	return edges, nil
}

// ChainText writes a chain as a policy check shows it: applications → access_tokens (CASCADE).
func ChainText(chain []Edge) string {
	var b strings.Builder
	b.WriteString(chain[0].Parent)
	for _, e := range chain {
		fmt.Fprintf(&b, " → %s (%s)", e.Table, e.Action)
	}
	return b.String()
}

// CascadeStats answers, for the leaf oids $1 of the tables numbered $2, what this transaction
// deleted and updated in each table so far, as two arrays in table order.
var CascadeStats = render("cascade-stats", nil)

// countNode is one table a dry run's cascade count follows: its rows referencing a deleted row
// of a node before it, by any of its keys.
type countNode struct {
	Name, Table, Columns string
	Matches              []countMatch
	// refs are the referenced columns the keys from this node point at, in the order first met.
	refs []string
	oid  uint32
}

// countMatch is one key onto node From: the rows of x whose Columns hold From's Refs.
type countMatch struct{ Columns, Refs, From string }

// countRows counts the rows of Table that Matches find.
type countRows struct {
	Table   string
	Matches []countMatch
}

// countAnswer is one number the count answers: the rows of node Node less those Less counts
// (a delete_with child's own), or the rows Rows counts, or 0 when both are unset.
type countAnswer struct {
	Node       string
	Rows, Less *countRows
}

// CascadeCount renders the dry run's count of pass p (its age column of kind k) with the
// cascades of g: the eligible rows, each delete_with child's, then for each table of named (the
// oids of p.Cascades, in order) the rows its keys would delete and the rows they would change
// (SET NULL, SET DEFAULT). It is "" when the keys form a cycle (a table whose key references
// itself, say), which one statement of plain subqueries cannot follow; a one-to-one parent's key
// back onto the swept table is none (inert).
func CascadeCount(p policy.Pass, k Kind, g *Graph, named []uint32) string {
	v := newPass(p, k)
	nodes := []*countNode{{Name: "p", oid: g.Root}}
	byOID := map[uint32]*countNode{g.Root: nodes[0]}
	add := func(oid uint32, table string) *countNode {
		if n, ok := byOID[oid]; ok {
			return n
		}
		n := &countNode{Name: fmt.Sprintf("n%d", len(nodes)), Table: table, oid: oid}
		nodes = append(nodes, n)
		byOID[oid] = n
		return n
	}
	need := func(n *countNode, cols []string) {
		for _, c := range cols {
			if !slices.Contains(n.refs, c) {
				n.refs = append(n.refs, c)
			}
		}
	}
	// parents are, per node, the nodes it references: what must come before it.
	parents := map[*countNode][]*countNode{}
	childOnly := make([]*countRows, len(p.DeleteWith))
	for i, c := range p.DeleteWith {
		n := add(g.Children[i], QuoteName(c.Table))
		refs := policy.Refs(c.References)
		need(nodes[0], refs)
		m := countMatch{Columns: ColumnList("x", c.Columns), Refs: ColumnList("p", refs), From: "p"}
		n.Matches = append(n.Matches, m)
		parents[n] = append(parents[n], nodes[0])
		childOnly[i] = &countRows{Table: QuoteName(c.Table), Matches: []countMatch{m}}
	}
	updates := map[uint32]*countRows{}
	for _, e := range g.Edges {
		if inert(p, g, e) {
			continue
		}
		from := byOID[e.ParentOID]
		if from == nil {
			return "" // a key from a table no node deletes from: the walk follows only deletes
		}
		need(from, e.Refs)
		m := countMatch{Columns: ColumnList("x", e.Columns), Refs: ColumnList(from.Name, e.Refs), From: from.Name}
		if !e.Deletes() {
			u := updates[e.TableOID]
			if u == nil {
				u = &countRows{}
				updates[e.TableOID] = u
			}
			u.Table, u.Matches = QuoteName(e.Qualified), append(u.Matches, m)
			continue
		}
		if e.TableOID == g.Root {
			return "" // the swept table's own rows, by a key onto itself: a cycle
		}
		n := add(e.TableOID, QuoteName(e.Qualified))
		n.Matches = append(n.Matches, m)
		parents[n] = append(parents[n], from)
	}
	order, ok := topological(nodes, parents)
	if !ok {
		return ""
	}
	root := nodes[0]
	root.Columns = columnsOrOne("t", root.refs)
	for _, n := range order {
		n.Columns = columnsOrOne("x", n.refs)
	}
	answers := []countAnswer{{Node: root.Name}}
	for i := range p.DeleteWith {
		answers = append(answers, countAnswer{Rows: childOnly[i]})
	}
	for _, oid := range named {
		var deleted countAnswer
		if n, ok := byOID[oid]; ok && n != root {
			deleted.Node = n.Name
			if i := slices.Index(g.Children, oid); i >= 0 {
				deleted.Less = childOnly[i]
			}
		}
		answers = append(answers, deleted, countAnswer{Rows: updates[oid]})
	}
	return render("cascade-count", struct {
		pass
		Root    *countNode
		Nodes   []*countNode
		Answers []countAnswer
	}{v, root, order, answers})
}

// inert says whether key e, from a delete_with parent back onto the swept table on the entry's
// own column pairs, changes nothing: the parent's rows the statement deletes are those its row
// references one-to-one (the policy check proves the swept column unique), so the rows the key
// finds are the statement's own, gone already. Not when a cascade deletes more of the parent's
// rows, whose swept rows would go too: a cycle.
func inert(p policy.Pass, g *Graph, e Edge) bool {
	i := slices.Index(g.Children, e.ParentOID)
	if e.TableOID != g.Root || i < 0 || slices.Index(g.Children[i+1:], e.ParentOID) >= 0 {
		return false
	}
	if slices.ContainsFunc(g.Edges, func(o Edge) bool { return o.Deletes() && o.TableOID == e.ParentOID }) {
		return false
	}
	c := p.DeleteWith[i]
	return pairKey(e.Columns, e.Refs) == pairKey(policy.Refs(c.References), c.Columns)
}

// columnsOrOne is the columns a node carries, qualified by alias, or 1 for none.
func columnsOrOne(alias string, columns []string) string {
	if len(columns) == 0 {
		return "1"
	}
	return ColumnList(alias, columns)
}

// topological orders the nodes after the first so that each comes after its parents; false
// when they form a cycle.
func topological(nodes []*countNode, parents map[*countNode][]*countNode) ([]*countNode, bool) {
	done := map[*countNode]bool{nodes[0]: true}
	var out []*countNode
	for len(out) < len(nodes)-1 {
		progress := false
		for _, n := range nodes[1:] {
			if done[n] {
				continue
			}
			ready := true
			for _, pn := range parents[n] {
				ready = ready && done[pn]
			}
			if ready {
				done[n], progress = true, true
				out = append(out, n)
			}
		}
		if !progress {
			return nil, false
		}
	}
	return out, true
}

// pairKey writes the column pairs of a key (columns[i] holds refs[i]) in an order of their own,
// so that a guard or child naming a key's pairs in any order matches it.
func pairKey(columns, refs []string) string {
	ps := make([]string, len(columns))
	for i, c := range columns {
		if i < len(refs) {
			ps[i] = c + "\x00" + refs[i]
		}
	}
	slices.Sort(ps)
	return strings.Join(ps, "\x01")
}
