// Package nonce is the replay store shared by every API replica: the nonces of accepted signed
// requests in table sweeprail.replay_nonce, until their signature's window closes. It implements
// signing.ReplayStore, and purges expired nonces on a schedule of its own (Store.Run).
package nonce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PurgeInterval is how often each replica purges expired nonces. The table then holds the
// nonces of one signature window plus at most this much of expired ones, whatever the request
// rate: purging as nonces arrive left a flood's rows for days once the flood stopped.
const PurgeInterval = 15 * time.Second

// purgeBatch bounds one delete statement, and purgeMaxBatches one purge: 100,000 rows per
// interval, over 6,000 a second, far above what one key holder's requests can add, while each
// statement stays short. purgeStatementTimeout bounds each statement.
const (
	purgeBatch            = 5000
	purgeMaxBatches       = 20
	purgeStatementTimeout = 5 * time.Second
)

// Store records nonces in pool's database.
type Store struct {
	pool *pgxpool.Pool
}

// New returns the replay store of pool's database (sweeprail's own schema, api migrate up).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Admit records nonce until expires, and reports whether it was new. A nonce whose record has
// expired is admitted again: its old request can no longer pass the signature's window anyway.
// The primary key decides, so two replicas admitting one nonce at once admit it once.
func (s *Store) Admit(ctx context.Context, n uuid.UUID, expires time.Time) (bool, error) {
	var fresh bool
	err := s.pool.QueryRow(ctx, `
INSERT INTO sweeprail.replay_nonce (nonce, expires_at) VALUES ($1, $2)
ON CONFLICT (nonce) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE replay_nonce.expires_at < now()
RETURNING true`, n, expires).Scan(&fresh)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) { // no row: the nonce is live, a replay
		return false, fmt.Errorf("admit nonce: %w", err)
	}
	return fresh, nil
}

// Purge deletes expired nonces, a batch per statement, until a batch comes back short or
// purgeMaxBatches ran, and reports how many. Rows another replica is purging at the same moment
// are skipped, not waited for: whichever replica purges, each row goes once.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	var total int64
	for range purgeMaxBatches {
		n, err := s.purgeBatch(ctx)
		total += n
		if err != nil || n < purgeBatch {
			return total, err
		}
	}
	return total, nil
}

func (s *Store) purgeBatch(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, purgeStatementTimeout)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `DELETE FROM sweeprail.replay_nonce WHERE nonce IN (
  SELECT nonce FROM sweeprail.replay_nonce WHERE expires_at < now() LIMIT $1 FOR UPDATE SKIP LOCKED)`, purgeBatch)
	if err != nil {
		return 0, fmt.Errorf("purge expired nonces: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Run purges expired nonces every interval until ctx is done. Every replica runs it; a failed
// purge is logged and retried at the next tick, since a replay store that keeps a few expired
// rows longer refuses nothing it should accept.
func (s *Store) Run(ctx context.Context, every time.Duration, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := s.Purge(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("purge expired nonces", "err", err, "purged", n)
		case n > 0:
			logger.Debug("purged expired nonces", "nonces", n)
		}
	}
}
