// Command benchfig runs benchmarks and keeps their figures in one file
// that the documentation's tables are generated from:
//
//	go run ./cmd/benchfig run --out bench/results.json -- go test -json -run '^$' -bench . ./...
//	go run ./cmd/benchfig render --results bench/results.json README.md docs/api.md
//	go run ./cmd/benchfig render --check ...   # fail when a table is stale
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "benchfig:", err)
		os.Exit(1)
	}
}
