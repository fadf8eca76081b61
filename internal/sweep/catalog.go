package sweep

// Catalog returns the bundled sweeps over the reference schema, with their default retentions:
// the specs of the embedded catalog.yaml (see DefaultPolicy), a fresh copy on every call.
func Catalog() []Spec {
	return DefaultPolicy().Specs
}
