module github.com/electkit/election

go 1.26.0

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	golang.org/x/sys v0.49.0
)
