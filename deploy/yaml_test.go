package deploy

import (
	"strings"
	"testing"
)

// TestYAMLWellFormed parses every YAML file under deploy/, every document of each, so that a
// broken manifest fails here rather than at kubectl apply or compose up.
func TestYAMLWellFormed(t *testing.T) {
	files := walkFiles(t, ".", ".yaml", ".yml")
	// Guards against a walk that finds nothing (run from the wrong directory) and passes.
	if len(files) < 7 {
		t.Fatalf("found only %d YAML files under deploy/: %v", len(files), files)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			if docs := yamlDocs(t, f); len(docs) == 0 {
				t.Errorf("%s holds no YAML document", f)
			}
		})
	}
}

// TestDecodeYAMLRefusesMalformed proves that the parse above can fail: bad syntax, a duplicate
// key and a broken second document are each an error.
func TestDecodeYAMLRefusesMalformed(t *testing.T) {
	for name, text := range map[string]string{
		"syntax":          "a: [1, 2\n",
		"duplicate key":   "a: 1\na: 2\n",
		"second document": "a: 1\n---\nb: : c\n",
		"bad indentation": "a:\n  b: 1\n c: 2\n",
	} {
		if _, err := decodeYAML(strings.NewReader(text)); err == nil {
			t.Errorf("%s: %q parsed without error", name, text)
		}
	}
}
