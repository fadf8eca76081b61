package check_test

import (
	"testing"
)

// keysSchema is a media store's: children that belong to their media by its key with no foreign
// key saying so, remote media keyed by two columns, and a table whose two-column key is declared,
// with NO ACTION and CASCADE.
const keysSchema = `
CREATE TABLE media (media_id text PRIMARY KEY, title text, created_at timestamptz NOT NULL);
CREATE INDEX media_created_at ON media (created_at);
CREATE TABLE media_thumbs (media_id text NOT NULL, width int);
CREATE INDEX media_thumbs_media_id ON media_thumbs (media_id);
CREATE TABLE media_cache (media_id text);
CREATE TABLE media_uses (media_id varchar(64));
CREATE INDEX media_uses_media_id ON media_uses (media_id);
CREATE TABLE media_tags (title text);
CREATE INDEX media_tags_title ON media_tags (title);

CREATE TABLE remote_media (media_origin text, media_id text, created_at timestamptz NOT NULL, PRIMARY KEY (media_origin, media_id));
CREATE INDEX remote_media_created_at ON remote_media (created_at);
CREATE TABLE remote_thumbs (media_origin text NOT NULL, media_id text NOT NULL, width int);
CREATE INDEX remote_thumbs_key ON remote_thumbs (media_id, media_origin);
CREATE TABLE remote_pins (origin text, media text);
CREATE INDEX remote_pins_key ON remote_pins (origin, media);
CREATE TABLE remote_origin_only (media_origin text);
CREATE INDEX remote_origin_only_key ON remote_origin_only (media_origin);

CREATE TABLE keyed (origin text, id text, at timestamptz NOT NULL, PRIMARY KEY (origin, id));
CREATE INDEX keyed_at ON keyed (at);
CREATE TABLE keyed_refs (origin text, id text, FOREIGN KEY (origin, id) REFERENCES keyed (origin, id));
CREATE INDEX keyed_refs_key ON keyed_refs (origin, id);
CREATE TABLE keyed_cascaded (origin text, id text, FOREIGN KEY (id, origin) REFERENCES keyed (id, origin) ON DELETE CASCADE);
CREATE INDEX keyed_cascaded_key ON keyed_cascaded (id, origin);
`

// TestPolicyKeys checks delete_with and keep guards declared without a foreign key, and keys of
// two columns, accepted and refused: each row a policy, its exact refusals and warnings.
func TestPolicyKeys(t *testing.T) {
	t.Parallel()
	pool := fixturePool(t, keysSchema)
	tests := []refusalCase{
		{name: "a child declared without a key", yaml: pass("media", "created_at",
			"delete_with: [{table: media_thumbs, column: media_id, references: media_id, without_foreign_key: true}]")},
		{name: "a guard declared without a key", yaml: pass("media", "created_at",
			"keep_while_referenced_by: [{table: media_thumbs, column: media_id, references: media_id, without_foreign_key: true}]")},
		{name: "a two-column child declared without a key, its index in another order", yaml: pass("remote_media", "created_at",
			"delete_with: [{table: remote_thumbs, column: [media_origin, media_id], references: [media_origin, media_id], without_foreign_key: true}]")},
		{name: "a two-column guard", yaml: pass("remote_media", "created_at",
			"keep_while_referenced_by: [{table: remote_pins, column: [origin, media], references: [media_origin, media_id]}]")},
		{name: "a two-column key covered by delete_with, pairs in another order", yaml: pass("keyed", "at",
			"delete_with:",
			"  - {table: keyed_refs, column: [id, origin], references: [id, origin]}",
			"  - {table: keyed_cascaded, column: [origin, id], references: [origin, id]}")},
		{name: "a two-column key covered by a guard", yaml: pass("keyed", "at",
			"keep_while_referenced_by: [{table: keyed_refs, column: [origin, id], references: [origin, id]}]",
			"cascades: [keyed_cascaded]")},
		{name: "a declared child a foreign key proves", yaml: pass("keyed", "at",
			"delete_with: [{table: keyed_refs, column: [origin, id], references: [origin, id], without_foreign_key: true}]",
			"cascades: [keyed_cascaded]"),
			warnings: []string{
				`p.yaml:8: pass "p" of sweep "s": delete_with keyed_refs.(origin, id) = keyed.(origin, id) is declared without_foreign_key, but a foreign key between "keyed_refs" and "keyed" proves it: remove without_foreign_key`,
			}},
		{name: "a child without a key, undeclared", yaml: pass("media", "created_at",
			"delete_with: [{table: media_thumbs, column: media_id, references: media_id}]"),
			want: []string{
				`p.yaml:8: pass "p" of sweep "s": delete_with media_thumbs.media_id = media.media_id is no child of "media": no foreign key of media_thumbs (media_id) references media (media_id), nor the other way, so nothing says its rows belong to the deleted ones; add the foreign key, or remove the entry, or, where the application keeps the relation itself, declare it with without_foreign_key: true (media.media_id is unique, so each child belongs to one deleted row)`,
			}},
		{name: "a child of a column that is not unique, undeclared", yaml: pass("media", "created_at",
			"delete_with: [{table: media_tags, column: title, references: title}]"),
			want: []string{
				`p.yaml:8: pass "p" of sweep "s": delete_with media_tags.title = media.title is no child of "media": no foreign key of media_tags (title) references media (title), nor the other way, so nothing says its rows belong to the deleted ones; add the foreign key, or remove the entry`,
			}},
		{name: "a declared child of a column that is not unique", yaml: pass("media", "created_at",
			"delete_with: [{table: media_tags, column: title, references: title, without_foreign_key: true}]"),
			want: []string{
				`p.yaml:8: pass "p" of sweep "s": delete_with media_tags.title = media.title is declared without_foreign_key, but nothing makes media.title unique (no primary key, and no unique index without a where on those columns), so a row of "media_tags" may belong to several swept rows and go, or stay, with any one of them; name the swept table's primary key or unique columns in references, or add a unique index on media (title)`,
			}},
		{name: "a declared guard on one column of a two-column key", yaml: pass("remote_media", "created_at",
			"keep_while_referenced_by: [{table: remote_origin_only, column: media_origin, references: media_origin, without_foreign_key: true}]"),
			want: []string{
				`p.yaml:8: pass "p" of sweep "s": keep guard remote_origin_only.media_origin = remote_media.media_origin is declared without_foreign_key, but nothing makes remote_media.media_origin unique (no primary key, and no unique index without a where on those columns), so a row of "remote_origin_only" may belong to several swept rows and go, or stay, with any one of them; name the swept table's primary key or unique columns in references, or add a unique index on remote_media (media_origin)`,
			}},
		{name: "a declared child of another type", yaml: pass("media", "created_at",
			"delete_with: [{table: media_uses, column: media_id, references: media_id, without_foreign_key: true}]"),
			want: []string{
				`p.yaml:8: pass "p" of sweep "s": delete_with column media_uses.media_id is character varying(64) and the column it references, media.media_id, is text: a relation declared without_foreign_key pairs equal types; name the column of "media_uses" that holds media's media_id, or make the types equal`,
			}},
		{name: "a declared child no index serves", yaml: pass("media", "created_at",
			"delete_with: [{table: media_cache, column: media_id, references: media_id, without_foreign_key: true}]"),
			want: []string{
				`p.yaml:4: pass "p" of sweep "s": no index serves delete_with on media_cache.media_id, so every batch would read all of table "media_cache": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON media_cache (media_id);`,
			}},
		{name: "a declared child no index serves, allowed", yaml: pass("media", "created_at",
			"delete_with: [{table: media_cache, column: media_id, references: media_id, without_foreign_key: true}]", "allow_unindexed: true"),
			warnings: []string{
				`p.yaml:9: pass "p" of sweep "s": no index serves delete_with on media_cache.media_id, so every batch would read all of table "media_cache" (allowed by allow_unindexed); the index that would serve it: CREATE INDEX CONCURRENTLY ON media_cache (media_id);`,
			}},
		{name: "a two-column key, a pair not in it", yaml: pass("keyed", "at",
			"delete_with: [{table: keyed_refs, column: [origin, id], references: [id, origin]}]", "cascades: [keyed_cascaded]"),
			want: []string{
				`p.yaml:4: pass "p" of sweep "s": table "keyed" is referenced by foreign key keyed_refs_origin_id_fkey (keyed_refs (origin, id) → origin, id, ON DELETE NO ACTION): deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [{table: keyed_refs, column: [origin, id], references: [origin, id]}], or delete the referencing rows in the same statement with delete_with: [{table: keyed_refs, column: [origin, id], references: [origin, id]}] (delete_with 1 references id, origin, but the key points at origin, id)`,
				`p.yaml:8: pass "p" of sweep "s": delete_with keyed_refs.(origin, id) = keyed.(id, origin) is no child of "keyed": no foreign key of keyed_refs (origin, id) references keyed (id, origin), nor the other way, so nothing says its rows belong to the deleted ones; add the foreign key, or remove the entry`,
			}},
		{name: "a two-column key, a partial cover", yaml: pass("keyed", "at",
			"delete_with: [{table: keyed_refs, column: id, references: id}]", "cascades: [keyed_cascaded]"),
			want: []string{
				`p.yaml:4: pass "p" of sweep "s": table "keyed" is referenced by foreign key keyed_refs_origin_id_fkey (keyed_refs (origin, id) → origin, id, ON DELETE NO ACTION): deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [{table: keyed_refs, column: [origin, id], references: [origin, id]}], or delete the referencing rows in the same statement with delete_with: [{table: keyed_refs, column: [origin, id], references: [origin, id]}]`,
				`p.yaml:8: pass "p" of sweep "s": delete_with keyed_refs.id = keyed.id is no child of "keyed": no foreign key of keyed_refs (id) references keyed (id), nor the other way, so nothing says its rows belong to the deleted ones; add the foreign key, or remove the entry`,
				`p.yaml:4: pass "p" of sweep "s": no index serves delete_with on keyed_refs.id, so every batch would read all of table "keyed_refs": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON keyed_refs (id);`,
			}},
		{name: "a two-column cascade, a partial cover", yaml: pass("keyed", "at",
			"keep_while_referenced_by: [{table: keyed_refs, column: [origin, id], references: [origin, id]}, {table: keyed_cascaded, column: id, references: id}]"),
			want: []string{
				`p.yaml:4: pass "p" of sweep "s": deleting from table "keyed" deletes rows of table "keyed_cascaded", which the pass does not name, through the schema's ON DELETE keys: keyed → keyed_cascaded (CASCADE) (key keyed_cascaded_id_origin_fkey); keep the rows of "keyed" that keyed_cascaded references with keep_while_referenced_by: [{table: keyed_cascaded, column: [id, origin], references: [id, origin]}], or say that they go too with cascades: [keyed_cascaded]`,
			}},
		{name: "a two-column child without a key, undeclared", yaml: pass("remote_media", "created_at",
			"delete_with: [{table: remote_thumbs, column: [media_origin, media_id], references: [media_origin, media_id]}]"),
			want: []string{
				`p.yaml:8: pass "p" of sweep "s": delete_with remote_thumbs.(media_origin, media_id) = remote_media.(media_origin, media_id) is no child of "remote_media": no foreign key of remote_thumbs (media_origin, media_id) references remote_media (media_origin, media_id), nor the other way, so nothing says its rows belong to the deleted ones; add the foreign key, or remove the entry, or, where the application keeps the relation itself, declare it with without_foreign_key: true (remote_media.(media_origin, media_id) is unique, so each child belongs to one deleted row)`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			warnings, err := checkYAML(t, pool, tt.yaml)
			sameLines(t, "refusals", refusals(err), tt.want)
			sameLines(t, "warnings", warnings, tt.warnings)
		})
	}
}
