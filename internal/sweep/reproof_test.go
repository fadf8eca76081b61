package sweep_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// reproofSchema is a table of tokens and its archive, none past a 30-day retention yet.
const reproofSchema = `
CREATE TABLE tokens (id bigint PRIMARY KEY, issued_at timestamptz NOT NULL, note text);
CREATE INDEX tokens_issued_at ON tokens (issued_at);
CREATE SCHEMA cold;
CREATE TABLE cold.tokens (LIKE tokens INCLUDING ALL);
INSERT INTO tokens SELECT i, now() - interval '1 day', 'n' FROM generate_series(1, 50) AS i;
`

// reprovedRunner proves yaml's policy against pool as the API's boot does, and returns a runner
// that compares each pass with its proof, with its metrics' registry.
func reprovedRunner(t *testing.T, pool *pgxpool.Pool, yaml string) (*sweep.Runner, *prometheus.Registry) {
	t.Helper()
	pol, err := policy.Load("p.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	proofs, _, err := check.Prove(ctx, pool, pol)
	if err != nil {
		t.Fatalf("the boot's check refused the policy: %v", err)
	}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Labels{Sweeps: []metrics.Sweep{{Name: "s", Passes: []string{"p"}}}, Outcomes: wire.Outcomes()})
	if err != nil {
		t.Fatal(err)
	}
	return newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: settings(), Proofs: proofs, Metrics: m,
		History: history.New(pool, history.DefaultRetention)}), reg
}

func reproofs(t *testing.T, reg *prometheus.Registry, outcome string) int {
	t.Helper()
	return series(t, reg, "sweeprail_reproofs_total", outcome)
}

// series is the value of metric name's series whose outcome label is outcome.
func series(t *testing.T, reg *prometheus.Registry, name, outcome string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return int(m.GetCounter().GetValue())
				}
			}
		}
	}
	t.Fatalf("no %s{outcome=%q}", name, outcome)
	return 0
}

// TestReprove changes the schema after the boot's check and runs: a change the pass's check
// refuses stops the pass with schema-changed before it deletes a row, and the answer, the run
// history and the metrics name the change and the check's way out; a change it accepts is
// proven again, adopted, and the run goes on.
func TestReprove(t *testing.T) {
	t.Parallel()
	const (
		refused = "refused"
		proven  = "proven"
		// asTheCheck expects what a fresh boot check says of the changed schema.
		asTheCheck = "as the check"
	)
	cases := []struct {
		name, extra, change string
		want                string
		// named is a part of the changed fact the answer must name.
		named string
	}{
		{name: "a cascading key from another schema", change: `
CREATE SCHEMA other;
CREATE TABLE other.grants (id bigserial PRIMARY KEY, token_id bigint NOT NULL REFERENCES tokens (id) ON DELETE CASCADE);
CREATE INDEX ON other.grants (token_id);
INSERT INTO other.grants (token_id) SELECT i FROM generate_series(1, 40) AS i`,
			want: refused, named: "added: foreign key grants_token_id_fkey on other.grants: FOREIGN KEY (token_id) REFERENCES tokens(id) ON DELETE CASCADE"},
		{name: "an unrelated index and a comment", change: `
CREATE INDEX tokens_note ON tokens (note);
COMMENT ON TABLE tokens IS 'issued tokens'`, want: proven},
		{name: "an archive column dropped", extra: "archive_to: cold.tokens", change: `ALTER TABLE cold.tokens DROP COLUMN note`,
			want: refused, named: "removed: column cold.tokens.note: text"},
		{name: "an archive constraint trigger", extra: "archive_to: cold.tokens", change: `
CREATE FUNCTION cold.forget() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN DELETE FROM cold.tokens WHERE id = NEW.id; RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER forget AFTER INSERT ON cold.tokens DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION cold.forget()`,
			want: asTheCheck, named: "added: trigger forget on cold.tokens"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := userPool(t)
			exec(t, pool, reproofSchema)
			var extra []string
			if tc.extra != "" {
				extra = append(extra, tc.extra)
			}
			yaml := policyYAML(passYAML("tokens", "issued_at", extra...))
			r, reg := reprovedRunner(t, pool, yaml)
			// A run between the check and the change compares an unchanged schema.
			if res := run(t, r, "s"); res.StopReason != wire.StopExhausted || res.Deleted != 0 {
				t.Fatalf("run before the change: %s, deleted %d", res.StopReason, res.Deleted)
			}
			exec(t, pool, tc.change)
			exec(t, pool, `UPDATE tokens SET issued_at = now() - interval '40 days' WHERE id <= 30`)
			want := tc.want
			if want == asTheCheck {
				want = proven
				if _, err := checkYAML(t, pool, yaml); err != nil {
					want = refused
				}
			}
			res := run(t, r, "s")
			if want == proven {
				if res.StopReason != wire.StopExhausted || res.Deleted != 30 || reproofs(t, reg, metrics.ReproofProven) != 1 {
					t.Fatalf("re-proved run: %s, deleted %d, error %+v", res.StopReason, res.Deleted, res.Error)
				}
				// The new fingerprint was adopted: the next run compares it unchanged.
				run(t, r, "s")
				if n := reproofs(t, reg, metrics.ReproofProven); n != 1 {
					t.Errorf("the next run re-proved again (%d re-proofs): the new fingerprint was not adopted", n)
				}
				return
			}
			p := res.Passes[0]
			if res.StopReason != wire.StopSchemaChanged || p.StopReason != wire.StopSchemaChanged || p.Deleted != 0 || p.BatchCount != 0 || !res.Failed() {
				t.Fatalf("run after the change: %s (pass %s), deleted %d in %d batches", res.StopReason, p.StopReason, p.Deleted, p.BatchCount)
			}
			if n := count(t, pool, `SELECT count(*) FROM tokens`); n != 50 {
				t.Errorf("tokens hold %d rows after the refused run, want all 50", n)
			}
			if tableExists(t, pool, "other.grants") {
				if n := count(t, pool, `SELECT count(*) FROM other.grants`); n != 40 {
					t.Errorf("the other schema's table holds %d rows, want all 40", n)
				}
			}
			t.Logf("%+v", p.SchemaChanged)
			if p.SchemaChanged == nil || !containsPart(p.SchemaChanged.Changed, tc.named) || p.SchemaChanged.Refusal == "" {
				t.Fatalf("answer's schema change %+v, want it to name %q and the check's refusal", p.SchemaChanged, tc.named)
			}
			if res.Error == nil || res.Error.Code != sweep.SchemaChangedCode || res.Error.Pass != "p" || !strings.Contains(res.Error.Message, p.SchemaChanged.Refusal) {
				t.Errorf("answer's error %+v", res.Error)
			}
			if got := count(t, pool, `SELECT count(*) FROM sweeprail.run WHERE run_id = $1 AND stop_reason = 'schema-changed'
				AND error->>'code' = 'schema-changed' AND passes->0->'schemaChanged'->>'refusal' <> ''`, res.RunID); got != 1 {
				t.Error("the run history does not hold the schema-changed run with its change")
			}
			if reproofs(t, reg, metrics.ReproofRefused) != 1 || series(t, reg, "sweeprail_runs_total", string(wire.StopSchemaChanged)) != 1 {
				t.Error("metrics do not count the refused re-proof and the schema-changed run")
			}
		})
	}
}

func containsPart(changed []string, part string) bool {
	for _, c := range changed {
		if strings.Contains(c, part) {
			return true
		}
	}
	return false
}
