package main

import (
	"context"
	"errors"
	"io"
)

// serve is filled in by the HTTP rail.
func serve(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
	return errors.New("serve: not built yet")
}
