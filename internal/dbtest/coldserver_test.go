package dbtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/dbtest"
)

func TestColdServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.StartColdServer(t)
	u := s.Database(t, "cold")
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	if _, err := c.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}

	t.Run("stop ends every session at once", func(t *testing.T) {
		s.Stop(t)
		if err := c.Ping(ctx); err == nil {
			t.Fatal("a session survived the stop")
		}
		if _, err := pgx.Connect(ctx, u); err == nil {
			t.Fatal("connected to a stopped server")
		}
	})

	t.Run("start comes back on the same port with the data", func(t *testing.T) {
		s.Start(t)
		c2, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close(ctx)
		var v int
		if err := c2.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
			t.Fatalf("read back %d, %v; want 42", v, err)
		}
	})
}
