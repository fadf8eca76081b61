// Package check validates a policy against the live schema before it runs, so that a policy that
// cannot run is refused at boot (or by api policy check in CI) rather than failing its first
// batch. It plans statements and reads the catalog; it executes nothing, every transaction is
// rolled back. What a policy may say on its own is package policy's; the SQL is package
// statement's; the planner's answers are read by package explain.
//
// Each step returns what it found (a findings value: refusals, warnings), and its caller merges
// them. Per pass, in order:
//
//	catalog.go      the table, columns, function, guard and child tables exist, the age column
//	                compares with the cutoff, time_zone is one the database knows, a declared
//	                relation's pairs are of equal types; nothing
//	                after it runs unless it passes
//	foreignkey.go   no foreign key fails the delete: each covered by a guard or delete_with
//	deletewith.go   each delete_with entry is a child, or a parent one-to-one; one declared
//	                without_foreign_key (a keep guard too) references unique columns
//	cascade.go      every table the ON DELETE keys reach is named in cascades; DELETE triggers
//	partitions.go   mode partitions: the table is range-partitioned, the role may drop
//	compile.go      each guard, child and where compiles, calls nothing VOLATILE; the statement
//	index.go        an index serves the batch select and every lookup
//	archive.go      archive_to: the table, its columns and their types, grants and statement; a
//	                foreign one's remote columns, read
//	archiveproof.go archive_to's schema, triggers and rules; a foreign one's insert, rolled back
//	archiveremote.go a foreign one's remote triggers and rules, read through its server
//
// from partitions on, each step runs only when the one before refused nothing. Then, once every
// pass is checked:
//
//	advice.go       the passes no index serves, one index suggested per table and age column
//
// and beside them: check.go (Policy, the order above), proof.go (Prove: each proven pass's
// fingerprint, and Reprove, which a run calls when it changed), names.go (Names: the tables it
// proved, which statements name), schema.go (catalog reads and error text), indexsize.go (a
// suggested index's size), volatility.go (the VOLATILE calls of a condition).
package check
