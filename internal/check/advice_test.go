package check

import "testing"

// TestConjunctKey pins which spellings of a simple conjunct count as the same condition when
// the passes of a table are advised one index partial on what they share.
func TestConjunctKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"spacing", "state = 'closed'", "state='closed'", true},
		{"case of unquoted words", "State IS NOT NULL", "state is not null", true},
		{"!= for <>", "state != 'open'", "state <> 'open'", true},
		{"spacing in a list", "state IN ('a','b')", "state in ( 'a', 'b' )", true},
		{"case of a literal", "state = 'Closed'", "state = 'closed'", false},
		{"spaces in a literal", "state = 'a b'", "state = 'ab'", false},
		{"quoted identifier", `"State" = 'closed'`, "state = 'closed'", false},
		{"a space between words", "a NOT IN (1)", "anot IN (1)", false},
		{"!= in a literal", "state = '!='", "state = '<>'", false},
		{"doubled quote", "note = 'it''s'", "note = 'it''S'", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if ka, kb := conjunctKey(tt.a), conjunctKey(tt.b); (ka == kb) != tt.same {
				t.Errorf("conjunctKey(%q) = %q, conjunctKey(%q) = %q; same = %v, want %v", tt.a, ka, tt.b, kb, ka == kb, tt.same)
			}
		})
	}
}
