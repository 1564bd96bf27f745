//go:build !unix

package main

import (
	"context"
	"errors"
	"io"
)

// elect run needs process groups and signals: Unix only.
func runCommandDef() *command {
	return &command{
		name:     "run",
		summary:  "keep one copy of a command running (Unix only)",
		synopsis: "--name NAME [flags] -- CMD [ARGS…]",
		about:    "Runs CMD only while leading. It needs process groups and signals: Unix only.",
		example:  "elect run --name /services/scheduler -- ./scheduler",
		setup: func(f *flagSet) func(context.Context, io.Writer) error {
			f.takesArgs = true
			return func(context.Context, io.Writer) error {
				return errors.New("elect run needs a Unix system")
			}
		},
	}
}

func isGuard([]string) bool  { return false }
func guardMain([]string) int { return exitFailure }
