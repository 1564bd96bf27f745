module github.com/electkit/election

go 1.25.0

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	go.uber.org/goleak v1.3.0
)
