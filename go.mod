module github.com/electkit/election

go 1.25.0

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/cockroachdb/datadriven v1.0.3
	go.uber.org/goleak v1.3.0
)

require github.com/pmezard/go-difflib v1.0.0 // indirect
