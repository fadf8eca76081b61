package policy

// Catalog returns the bundled sweeps over the reference schema, with their default retentions:
// the specs of the embedded catalog.yaml (see Default), a fresh copy on every call.
func Catalog() []Spec {
	return Default().Specs
}
