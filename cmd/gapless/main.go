// Command gapless deploys SQL data pipelines without gaps and without lost
// rows. The commands live in package cli; this file only wires the process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/gapless-dev/gapless/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Env{
		Stdout:         os.Stdout,
		Stderr:         os.Stderr,
		Stdin:          os.Stdin,
		Now:            time.Now,
		Getwd:          os.Getwd,
		Interactive:    terminal(os.Stdin) && terminal(os.Stdout),
		StderrTerminal: terminal(os.Stderr),
	})
	stop()
	os.Exit(code)
}

// terminal reports whether f is a terminal (a Cygwin terminal counts).
func terminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}
