package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/mattn/go-isatty"
)

// Main is the whole gapless process: it runs the command named by
// os.Args[1:] on the real standard streams, clock and working directory,
// and returns the exit code. SIGINT and SIGTERM cancel the command's
// context, so it stops cleanly and releases what it holds. cmd/gapless and
// the tests that run gapless as a process (their test binary re-executed
// as gapless) both call it, so they run the same code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, os.Args[1:], Env{
		Stdout:         os.Stdout,
		Stderr:         os.Stderr,
		Stdin:          os.Stdin,
		Getwd:          os.Getwd,
		Interactive:    terminal(os.Stdin) && terminal(os.Stdout),
		StderrTerminal: terminal(os.Stderr),
	})
}

// terminal reports whether f is a terminal (a Cygwin terminal counts).
func terminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}
