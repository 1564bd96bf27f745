module github.com/electkit/election/backend/zk/zksuite

go 1.26.0

require (
	github.com/electkit/election v0.1.0
	github.com/electkit/election/backend/zk v0.1.0
	github.com/electkit/election/electiontest v0.1.0
	github.com/electkit/election/internal/rig/zktest v0.1.0
	github.com/go-zookeeper/zk v1.0.4
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
)
