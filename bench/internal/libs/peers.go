package libs

import (
	"context"

	"github.com/electkit/election/bench/internal/peer"
)

// peerEntries lists the peers built in their own packages. Each is one
// entry; uncomment an entry (and its import) once its package is in the
// tree. Until then the reports name the peer as not measured.
//
// The scenarios ask for connections through env.Conns: Proxied (Crash must
// cut the candidate's connection), Counted (peer.Counter on candidates and
// on the library), Pool (N candidates share Pool clients). An adapter that
// cannot honour one says so in its own options or ignores it; the report
// then shows what it measured.
func peerEntries() []Entry {
	var _ = context.Background
	var _ peer.Library
	return []Entry{
		// client-go tools/leaderelection on etcd keys, ReleaseOnCancel,
		// default timings (import "github.com/electkit/election/bench/internal/peers/clientgo"):
		//
		// {Name: ClientGoName, Store: Etcd, Role: Peer, New: func(_ context.Context, env Env) (peer.Library, error) {
		// 	return clientgo.New(env.Endpoints), nil
		// }},

		// Apache Curator LeaderLatch in a JVM on the same ZooKeeper
		// (import "github.com/electkit/election/bench/internal/peers/curator"):
		//
		// {Name: CuratorName, Store: ZK, Role: Peer, Available: curator.Available, New: func(ctx context.Context, env Env) (peer.Library, error) {
		// 	return curator.New(ctx, env.Servers)
		// }},
	}
}
