// Command modelserver serves one ML model over the Open Inference Protocol
// v2 (`modelserver serve`) and fetches a model version's artifacts for its
// init container (`modelserver fetch`); see package
// github.com/mlsysops-go/mlsysops/mlconnector/serving/app.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.NewCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
