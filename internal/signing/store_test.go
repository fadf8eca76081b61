package signing

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// memoryStore is a ReplayStore in memory, shared by the verifiers a test builds the way the
// API's table is shared by replicas and restarts: a nonce is new until it was admitted and its
// expiry is still ahead of the store's clock. It records what it was asked, and fails every
// Admit with err when err is set.
type memoryStore struct {
	mu    sync.Mutex
	now   func() time.Time
	until map[uuid.UUID]time.Time
	asked []uuid.UUID
	ctx   []context.Context
	err   error
}

func newMemoryStore(now func() time.Time) *memoryStore {
	return &memoryStore{now: now, until: map[uuid.UUID]time.Time{}}
}

func (s *memoryStore) Admit(ctx context.Context, nonce uuid.UUID, expires time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked, s.ctx = append(s.asked, nonce), append(s.ctx, ctx)
	if s.err != nil {
		return false, s.err
	}
	if until, ok := s.until[nonce]; ok && !s.now().After(until) {
		return false, nil
	}
	s.until[nonce] = expires
	return true, nil
}

func (s *memoryStore) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.asked)
}

// TestVerifyWithStore holds the replay store's part of Verify: it is asked only after the MAC
// and the local cache passed, it refuses a nonce another replica (or this process before a
// restart) accepted, it keeps a nonce for exactly the request's window, a store that fails
// refuses the request, and a full cache leaves the nonce to the store alone.
func TestVerifyWithStore(t *testing.T) {
	t.Parallel()
	req := goodRequest()
	nonce := uuid.MustParse(testNonce)
	header := req.sign(keys(curKey), base(), testNonce)

	t.Run("another replica's nonce is refused", func(t *testing.T) {
		t.Parallel()
		clk := newClock(base())
		store := newMemoryStore(clk.now)
		first := NewVerifier(keys(curKey), window, clk.now, 100).WithStore(store)
		second := NewVerifier(keys(curKey), window, clk.now, 100).WithStore(store)
		wantReason(t, req.verify(first, header), "")
		// The second replica's own cache has never seen the nonce: only the store knows it.
		err := req.verify(second, header)
		wantReason(t, err, ReasonReplayed)
		var e *Error
		if errors.As(err, &e) && e.Detail != "nonce "+testNonce+" was already used, by this or another replica" {
			t.Errorf("detail %q, want it to say another replica may have used it", e.Detail)
		}
		if got := store.calls(); got != 2 {
			t.Errorf("store asked %d times, want once per replica", got)
		}
	})

	t.Run("kept for the request's window", func(t *testing.T) {
		t.Parallel()
		clk := newClock(base())
		store := newMemoryStore(clk.now)
		wantReason(t, req.verify(NewVerifier(keys(curKey), window, clk.now, 100).WithStore(store), header), "")
		if got := store.until[nonce]; !got.Equal(base().Add(window)) {
			t.Fatalf("stored until %v, want the signing time plus the window, %v", got, base().Add(window))
		}
		// A restarted process, its cache empty, at the last instant of the window.
		clk.set(base().Add(window))
		wantReason(t, req.verify(NewVerifier(keys(curKey), window, clk.now, 100).WithStore(store), header), ReasonReplayed)
	})

	t.Run("asked only after the MAC and the cache passed", func(t *testing.T) {
		t.Parallel()
		clk := newClock(base())
		store := newMemoryStore(clk.now)
		v := NewVerifier(keys(curKey), window, clk.now, 100).WithStore(store)
		// A forged request must not burn the nonce in the store, where every replica would
		// then refuse the genuine one.
		wantReason(t, req.verify(v, req.sign(keys(otherKey), base(), testNonce)), ReasonBad)
		wantReason(t, req.verify(v, req.sign(keys(curKey), base().Add(-2*window), testNonce)), ReasonStale)
		if got := store.calls(); got != 0 {
			t.Fatalf("store asked %d times before any request passed the MAC", got)
		}
		wantReason(t, req.verify(v, header), "")
		// The local cache answers a replay to this process without a round trip.
		wantReason(t, req.verify(v, header), ReasonReplayed)
		if got := store.calls(); got != 1 {
			t.Fatalf("store asked %d times, want once: for the genuine request only", got)
		}
	})

	t.Run("a failing store refuses the request", func(t *testing.T) {
		t.Parallel()
		clk := newClock(base())
		store := newMemoryStore(clk.now)
		store.err = errors.New("connection refused")
		v := NewVerifier(keys(curKey), window, clk.now, 100).WithStore(store)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		err := v.VerifyContext(ctx, header, req.method, req.path, req.query, req.body)
		var e *Error
		if err == nil || errors.As(err, &e) || !errors.Is(err, store.err) || !errors.Is(err, ErrReplayStore) {
			t.Fatalf("Verify = %v (%T), want the store's error as ErrReplayStore, no *Error: a failure of ours, not the caller's", err, err)
		}
		if store.ctx[0] != ctx {
			t.Error("the store was not asked under the request's context")
		}
	})

	t.Run("a full cache leaves the nonce to the store", func(t *testing.T) {
		t.Parallel()
		clk := newClock(base())
		store := newMemoryStore(clk.now)
		v := NewVerifier(keys(curKey), window, clk.now, 1).WithStore(store)
		wantReason(t, req.verify(v, req.sign(keys(curKey), base(), uuid.NewString())), "")
		// The cache is full: the next nonce is the store's alone to judge, both ways.
		wantReason(t, req.verify(v, header), "")
		wantReason(t, req.verify(v, header), ReasonReplayed)
		if got := store.calls(); got != 3 {
			t.Errorf("store asked %d times, want 3", got)
		}
	})
}
