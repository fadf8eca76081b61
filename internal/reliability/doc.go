// Package reliability proves that sweeprail keeps its promises when things go wrong: real api
// and sweepcron processes, built from this tree, against a real PostgreSQL on loopback.
//
// It holds tests only (this file exists so the directory is a package). docs/RELIABILITY.md lists
// every scenario, what it proves, its figures, and the deliberately broken builds each one was
// seen failing against.
//
// The fast subset runs in make test (plain go test ./...): hostile requests against a real api,
// a batch blocked by a table lock, kill -9 in the middle of a sweep, and the network faults a
// protocol-aware proxy (package pgproxy) fires between the api and PostgreSQL: a cut at a
// batch's COMMIT reply, added latency, a reset in a batch's statement. The long ones, a
// PostgreSQL restart in the middle of a sweep (on a cluster of its own), a black hole at a
// COMMIT reply (held to the batch's deadline), a PgBouncer of the test's own restarted at one,
// and a load of three APIs, four sweepcron loops and a writer, run only with RELIABILITY=1, which
// make test-reliability sets.
//
// Every wait polls the database's own state (sweep_lock rows, pg_stat_activity,
// pg_blocking_pids) or a process's output, bounded in time; no test sleeps to order events.
package reliability
