package sweep_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// BenchmarkReproofRead measures what a run adds per pass to compare its schema with its proof:
// the fingerprint's one catalog read (in its read-only transaction, as a run reads it), against
// one 1000-row batch of the same pass (the bundled email-messages sent pass on the demo table,
// index path, in its own transaction), each the median of many. Run it alone:
//
//	go test ./internal/sweep -run '^$' -bench BenchmarkReproofRead -benchtime 1x
func BenchmarkReproofRead(b *testing.B) {
	const reads, batches, batchRows = 300, 30, 1000
	pool := dbtest.Pool(b)
	var p policy.Pass
	for _, s := range policy.Catalog() {
		if s.Name == "email-messages" {
			p = s.Passes[0]
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO email_messages (to_address, subject, status, created_at, sent_at)
		SELECT 'a@example.com', 's', 'sent', now() - interval '30 days', now() - interval '30 days' + i * interval '1 second'
		FROM generate_series(1, $1) AS i`, batches*batchRows+20_000); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE email_messages"); err != nil {
		b.Fatal(err)
	}
	form := statement.Build(p, statement.Instant).Unlocked.Index
	begin := statement.BatchTransaction{StatementTimeout: 5 * time.Second, LockTimeout: time.Second, IdleTimeout: 10 * time.Second, Ordered: true}
	cutoff := time.Now().Add(-p.Retention)
	// One connection, warmed, serves both, interleaved, so a busy neighbour slows both alike.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	read := func() time.Duration {
		began := time.Now()
		if _, err := sweep.ReadFingerprint(ctx, conn, statement.Timeouts{Statement: 5 * time.Second, Lock: time.Second}, p); err != nil {
			b.Fatal(err)
		}
		return time.Since(began)
	}
	for range 10 {
		read()
	}
	for range b.N {
		var readTook, batchTook []time.Duration
		for range batches {
			for range reads / batches {
				readTook = append(readTook, read())
			}
			began := time.Now()
			err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{BeginQuery: strings.Join(begin.Begin(), ";\n")}, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, form.SQL, form.Params.Bind(statement.Args{Cutoff: cutoff, Limit: batchRows})...)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			batchTook = append(batchTook, time.Since(began))
		}
		read, batch := median(readTook), median(batchTook)
		b.ReportMetric(float64(read.Microseconds()), "read-µs")
		b.ReportMetric(float64(batch.Microseconds()), "batch-µs")
		b.ReportMetric(100*float64(read)/float64(batch), "read-%-of-batch")
	}
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}
