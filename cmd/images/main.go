// Command images builds the project's container images (see
// internal/images): `make images` writes them to bin/images as an OCI
// layout, its tar archive and a manifest; --push also pushes them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, newCommand()))
}
