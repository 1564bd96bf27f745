module github.com/electkit/election

go 1.26.0

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/cockroachdb/datadriven v1.0.3
	github.com/go-zookeeper/zk v1.0.4
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
)
