// Package metrics exports an election's health as Prometheus metrics: who
// leads, the fencing token, leaderships gained and lost (by why), lease
// renewals and their round trip, the deadline slack at each renewal (the
// number that warns before a lease is lost), Campaign waits and the leader
// changes Observe reports.
//
// It is fed only through election.Events, so it works with every backend
// and no backend has code for it. Give the Collector's Events to the
// Elector (election.WithEvents): it reports the Elector's Terms and
// renewals, and, under election.Run, its campaigns and leader changes:
//
//	m, err := metrics.New("/orders")
//	if err != nil {
//		return err
//	}
//	prometheus.MustRegister(m)
//	e, err := etcd.New(cli, "/orders", election.WithEvents(m.Events()))
//	…
//	err = election.Run(ctx, e, election.Callbacks{OnElected: serve})
//
// A service that runs many elections (one per shard, say) uses one Set,
// registered once, and asks it for the Events of each election name; Forget
// drops the series of an election the process no longer takes part in.
// Collectors of different elections can share a registry too, but not with
// a Set of the same namespace.
//
// The package lives in a module of its own
// (github.com/electkit/election/metrics), so that users of the election
// library who do not want client_golang never have it in their module
// graph.
//
// # Metrics
//
// Every metric carries the label election, the name given to New or
// Set.Events; none carries a token or a candidate ID, so the number of
// series does not grow with leaderships. The names below use the default
// namespace "election" (WithNamespace changes it). A token is a float64
// sample: exact up to 2^53.
//
//	election_leading                        gauge      1 while this process holds a valid Term, else 0
//	election_token                          gauge      fencing token of this process's latest Term (0: none yet); it stays after the Term ends
//	election_leaderships_gained_total       counter    Terms begun
//	election_leaderships_lost_total         counter    Terms ended, by reason
//	election_renewals_total                 counter    renewal attempts, by outcome (ok, failed)
//	election_renewal_latency_seconds       histogram  round trip of each renewal attempt (Renewal.Latency)
//	election_renewal_slack_seconds         histogram  deadline slack at each renewal attempt
//	election_renewal_last_slack_seconds     gauge      slack at the latest renewal of the current Term
//	election_renewal_slack_ratio            gauge      the same, as a fraction of the lease window
//	election_lease_window_seconds           gauge      the lease window: TTL/(1+Drift) − Margin
//	election_campaign_wait_seconds         histogram  how long each Campaign of Run waited, by outcome (elected, failed)
//	election_leader_changes_total           counter    leader changes Observe reported to Run
//
// The reason of election_leaderships_lost_total is the name of the
// package election sentinel the Term's error wraps (the outermost one when
// it wraps several): resigned, transferred, preempted, unhealthy,
// session_lost, lease_expired, closed; other for anything else. Every
// reason and outcome is exported from the start, at 0, so that rate() and
// increase() see the first event.
//
// The slack of a renewal attempt is how much of the Term's validity was
// left when it was sent: the deadline before it minus its send time
// (election.Events.Renewed). With renewals every I and a lease window W
// it stays near W − I; when renewals fail it falls toward zero, and the
// Term ends with ErrLeaseExpired when it gets there. The window is not
// handed to the Events: the collector learns it from the first
// successful renewal of each Term (its new deadline minus its send time is
// the window), and keeps it for the next Terms of the election, so
// election_renewal_slack_ratio and election_lease_window_seconds appear
// from the first successful renewal on. The three gauges of the current
// Term are exported only while this process leads: a follower has no
// lease to be short of.
//
// Alert before leadership is lost — less than a fifth of the window was
// left at the latest renewal:
//
//	election_renewal_slack_ratio < 0.2
//
// # Concurrency and ordering
//
// The Events are safe for concurrent use, and so is Collect. The calls for
// one Term come in order, but those of different Terms may overlap (the end
// of one Term can be reported after the start of the next), so
// election_leading counts the Terms begun and not yet ended, by token,
// rather than following the latest call.
package metrics
