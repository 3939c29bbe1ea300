// Command gapless deploys SQL data pipelines without gaps and without lost
// rows. The commands live in package cli; this file only wires the process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gapless-dev/gapless/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Env{
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Now:    time.Now,
		Getwd:  os.Getwd,
	})
	stop()
	os.Exit(code)
}
