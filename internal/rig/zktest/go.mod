module github.com/electkit/election/internal/rig/zktest

go 1.26.0

require (
	github.com/electkit/election v0.1.0
	github.com/go-zookeeper/zk v1.0.4
)
