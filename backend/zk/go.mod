module github.com/electkit/election/backend/zk

go 1.26.0

require (
	github.com/electkit/election v0.1.0
	github.com/electkit/election/internal/rig/zktest v0.1.0
	github.com/go-zookeeper/zk v1.0.4
)

require github.com/cenkalti/backoff/v4 v4.3.0 // indirect
