// Package nonce is the replay store shared by every API replica: the nonces of accepted signed
// requests in table sweeprail.replay_nonce, until their signature's window closes. It implements
// signing.ReplayStore.
package nonce

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// purgeEvery is how many admitted nonces pass between two purges of expired ones, and
// purgeBatch bounds one purge: the table stays about as large as the live window.
const (
	purgeEvery = 100
	purgeBatch = 1000
)

// Store records nonces in pool's database.
type Store struct {
	pool     *pgxpool.Pool
	admitted atomic.Int64
}

// New returns the replay store of pool's database (sweeprail's own schema, api migrate up).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Admit records nonce until expires, and reports whether it was new. A nonce whose record has
// expired is admitted again: its old request can no longer pass the signature's window anyway.
// Every purgeEvery admissions it also purges a batch of expired nonces.
func (s *Store) Admit(ctx context.Context, n uuid.UUID, expires time.Time) (bool, error) {
	var fresh bool
	err := s.pool.QueryRow(ctx, `
INSERT INTO sweeprail.replay_nonce (nonce, expires_at) VALUES ($1, $2)
ON CONFLICT (nonce) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE replay_nonce.expires_at < now()
RETURNING true`, n, expires).Scan(&fresh)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) { // no row: the nonce is live, a replay
		return false, fmt.Errorf("admit nonce: %w", err)
	}
	if fresh && s.admitted.Add(1)%purgeEvery == 0 {
		if _, err := s.Purge(ctx); err != nil {
			return true, err
		}
	}
	return fresh, nil
}

// Purge deletes up to a batch of expired nonces and reports how many.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sweeprail.replay_nonce WHERE nonce IN (
  SELECT nonce FROM sweeprail.replay_nonce WHERE expires_at < now() LIMIT $1)`, purgeBatch)
	if err != nil {
		return 0, fmt.Errorf("purge expired nonces: %w", err)
	}
	return tag.RowsAffected(), nil
}
