package history

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The statements of sweeprail.archive_halt: a halt is written once (a second one of the same
// sweep keeps the first, which names the batch first exposed), and read before every run.
const (
	writeHalt = `INSERT INTO sweeprail.archive_halt (sweep, pass, run_id, message) VALUES ($1, $2, $3, $4)
ON CONFLICT (sweep) DO NOTHING`
	readHalt = `SELECT pass, run_id::text, message, halted_at FROM sweeprail.archive_halt WHERE sweep = $1`
)

// Halt is a sweep halted because a foreign archive lost a committed batch's rows: no batch of
// the sweep runs until an operator deletes its row.
type Halt struct {
	Sweep, Pass, RunID, Message string
	At                          time.Time
}

// WriteHalt keeps halt h; a sweep halted already keeps its first halt.
func (s *Store) WriteHalt(ctx context.Context, h Halt) error {
	if _, err := s.pool.Exec(ctx, writeHalt, h.Sweep, h.Pass, h.RunID, h.Message); err != nil {
		return fmt.Errorf("write the halt of sweep %q: %w", h.Sweep, err)
	}
	return nil
}

// ReadHalt reads sweep's halt, nil when it is not halted.
func (s *Store) ReadHalt(ctx context.Context, sweep string) (*Halt, error) {
	h := Halt{Sweep: sweep}
	err := s.pool.QueryRow(ctx, readHalt, sweep).Scan(&h.Pass, &h.RunID, &h.Message, &h.At)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read the halt of sweep %q: %w", sweep, err)
	}
	return &h, nil
}
