package libs

import (
	"context"

	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/bench/internal/peers/clientgo"
	"github.com/electkit/election/bench/internal/peers/curator"
)

// peerEntries lists the peers built in their own packages, one entry each.
// A peer left out here (or whose Available fails) is reported loudly as not
// measured.
//
// The scenarios say what they need through env: env.Conns — Proxied (Crash
// must cut the candidate's connection), Counted (peer.Counter on candidates
// and on the library), Pool (N candidates share Pool clients) — and
// env.Scenario and env.Short. Both peers here always connect each candidate
// through its own proxies, which is what Crash needs; they count nothing,
// so the herd and the steady-state rate say "not counted" for them.
func peerEntries() []Entry {
	return []Entry{
		// client-go tools/leaderelection on one etcd key per election,
		// ReleaseOnCancel, at client-go's default timings (15 s, 10 s,
		// 2 s) — except in crash failover, where its timings follow the
		// TTL (LeaseDuration = TTL) so that "TTL 2 s" means the same for
		// every library. Every candidate has its own client and proxies
		// and polls every 2 s: 1,000 is as many as the scale scenario runs.
		{Name: ClientGoName, Store: Etcd, Role: Peer, MaxCandidates: 1000, OwnConnections: true, New: func(_ context.Context, env Env) (peer.Library, error) {
			if env.Scenario == "crash" {
				return clientgo.New(env.Endpoints, clientgo.WithTTLTimings()), nil
			}
			return clientgo.New(env.Endpoints), nil
		}},

		// Apache Curator LeaderLatch, every candidate a CuratorFramework
		// in one JVM on the same ZooKeeper; New warms the JVM up (a few
		// handovers only in the -short smoke). Its names are relative to
		// its prefix. At most 500 candidates (its own limit).
		{Name: CuratorName, Store: ZK, Role: Peer, MaxCandidates: 500, OwnConnections: true, Available: curator.Available, New: func(ctx context.Context, env Env) (peer.Library, error) {
			var opts []curator.Option
			if env.Short {
				opts = append(opts, curator.WithWarmup(5))
			}
			if env.Scenario == "burst" { // thousands of latches in one JVM
				opts = append(opts, curator.WithJVMArgs("-Xmx1g", "-XX:+UseSerialGC"))
			}
			l, err := curator.New(ctx, env.Servers, opts...)
			if err != nil {
				return nil, err
			}
			return relative{l}, nil
		}},
	}
}
