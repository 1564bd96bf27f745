// Package inmem runs the classic leader-election algorithms of package
// classic live, inside one process: a Cluster gives each member a node of
// the chosen algorithm (Ring, Bully, LCR, HS, Tree or Zab) driven by a
// goroutine of its own, and the nodes talk over an in-process network with
// a configurable latency.
// Its members are election.Electors, so the package is both the election
// for programs whose replicas live in one process and the test double for
// code written against election.Elector, with fault injection built in:
// Crash, Recover, Partition and Heal.
//
//	c, err := inmem.NewCluster(inmem.Bully, inmem.WithLatency(time.Millisecond))
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	a, _ := c.Join(election.WithID("a"), election.WithPriority(2))
//	b, _ := c.Join(election.WithID("b"), election.WithPriority(1))
//	t, err := a.Campaign(ctx) // a leads; b.Leader(ctx) names a
//	c.Crash(a)                // a dies without resigning: t ends at its Deadline
//
// Everything is driven by time.Ticker and timers, so tests run it inside a
// testing/synctest bubble in fake time, with no real sleeps; the package's
// own tests and the conformance suite (package electiontest) do.
//
// # Time
//
// The algorithms count ticks; a tick lasts WithTick (10ms by default).
// Failure detectors probe every HeartbeatTicks and take a peer that has not
// answered a probe within TimeoutTicks for dead (Timing). Every message,
// the algorithm's and the cluster's own, takes WithLatency to arrive; a link
// is FIFO.
//
// # Membership and Campaign
//
// The classic state machines have a static member list, and Priority is
// their election attribute: the best live, eligible node by (Priority,
// earlier Join) wins. A member takes part in the algorithm only while its
// Elector campaigns or leads; otherwise its node is alive and relays
// messages but does not stand.
//
// Campaigns are admitted in batches, by a gate: a Campaign waits until the
// election is idle, meaning that no member holds a Term that may still be
// valid (a crashed leader's included, until its deadline) and that every
// candidate admitted before has led or withdrawn. Then the cluster builds
// the algorithm's nodes afresh over the current members (so joining never
// disturbs a leader, and no node carries stale knowledge into the new
// election), every waiting candidate becomes eligible at once, and the
// algorithm elects the best of the batch. When that leader's Term ends
// (Resign, Close, crash, lapse), the algorithm elects the next best of the
// same batch, through its own step-down and failure detection; candidates
// that campaigned meanwhile form the next batch. So a better candidate that
// campaigns while another leads does not preempt it: it waits for its
// batch (unless the leader was made WithPreemption, below). Within a batch,
// and across crashes and partitions, the algorithm alone decides. A member
// that joins between batches takes part from the next one, and meanwhile
// learns the leader from the leader's renewals.
//
// Campaign returns when the member's node names itself leader and the
// leadership is confirmed: the leader probes every other member, and a
// peer accepts when its own node names the same leader in the same epoch
// (it waits for its node to learn, up to TimeoutTicks). The Term is handed
// out once one peer accepted (or no peer is up to: all are crashed, gone or
// not yet in the algorithm) and every peer has answered or had TimeoutTicks
// to. So when Campaign returns, every member that can hear the leader
// already shows it.
//
// # Priority, preemption and transfer
//
// Priority is the election attribute, and the batches above decide who
// leads next: the remaining candidates of the current batch, best
// (Priority, earlier Join) first, and then the candidates at the gate, in
// the same order. election.Candidates on a member's Elector lists the
// waiting candidates in exactly that order (a better candidate
// that campaigned during a batch is listed after the rest of that batch,
// which leads before it). It is the gate's view, the same on every member,
// partitions or not. Ties go to the earlier Join, not to the earlier
// Campaign.
//
// Preemption and transfer are hand-overs, and they are the gate's doing,
// the same on every algorithm. The leader's Term ends first (with
// election.ErrPreempted or election.ErrTransferred) and the leader leaves
// the election, as after Resign; the other candidates of its batch go back
// to the gate, keeping their place; then the gate admits the hand-over's
// target alone, in a build of the nodes where it ranks first (its
// attribute is the highest there is; Leader still shows its Priority) and
// its node stands from the start, so the algorithm elects it without
// waiting for any timeout (not even the bully's OK timeout, which a node
// that turns eligible waits out). After the target's Term the batches go on as
// before. The old Term is over before the target can be admitted, so P3
// holds as for Resign, and the target's token is higher (a new build
// counts on from the epochs of the last).
//
//   - Preemption: when a leader made election.WithPreemption(hold) leads
//     and the best waiting candidate (by Priority, then Join) has a
//     strictly higher Priority and has waited hold since its Campaign
//     began (a withdrawn Campaign starts the wait anew), the gate hands
//     the leadership to that candidate. The gate watches the clock, not
//     the leader: a leader cut off from the candidate steps down all the
//     same.
//   - Transfer (call election.Transfer with the member's Elector): to
//     the named waiting candidate, or to the first of Candidates. Transfer returns once the target's Campaign has its
//     Term. It fails with election.ErrTransferFailed if the target leaves
//     first (Resign, Close, Crash, the end of its Campaign's ctx), or if
//     it has not led within the old Term's lease window plus the failure
//     detector's timeout (or ctx ends, or the member is closed): the
//     hand-over lapses, the target goes back to the gate in its place, and
//     the next batch forms as usual. The timeout is in the bound because a
//     new leader's Term is handed out only once every member has answered
//     its confirmation or been taken for dead: with a crashed member, a
//     transfer takes about that timeout.
//
// election.RequestTransfer is not supported: every member of a Cluster
// lives in this process, so a program that wants the leadership moved
// calls Transfer on the leading member's Elector (the one whose Campaign
// returned the Term); RequestTransfer returns an error wrapping
// errors.ErrUnsupported.
//
// Every algorithm supports both, Zab included (its target needs the ACKs
// of a majority, as any Zab leader). The algorithms' own ways to let a
// better node take over (the bully's bullying; a ring, LCR, HS or tree
// node that turns eligible and outranks the leader starts a new election;
// a Zab server drops a leader it outranks) know no hold-off and act
// whatever the leader's option, which is why the gate keeps a candidate out
// of the algorithm until its batch or its hand-over.
//
// A hand-over may lapse when a live member is cut off from the target by
// a partition: the target's Term is handed out only once every peer has
// answered its confirmation, and a live member cut off keeps the
// algorithm from settling. The target then leads from the next batch if
// it is the best waiting candidate, as the algorithm's partition handling
// allows (TestPreemptionAcrossPartition).
//
// # Tokens
//
// A Term's token is the algorithm's epoch, the number the leader announced
// in its Coordinator or Elected message: (base + epoch) << 16 | node, where
// node (below 2^16, hence MaxMembers) tells apart two leaders that a
// partition let announce the same epoch, and base carries the epochs on
// across the rebuilds of the nodes at each batch (it is the highest epoch
// the previous nodes used). Every algorithm announces an epoch above the
// highest it knows, and keeps it across Recover.
//
// # The lease
//
// A Term is valid until its last renewal's send time + TTL/(1+Drift) −
// Margin (backend.LeaseClock). The TTL is not the member's to choose: it
// is Timing.LeaseTTL = (TimeoutTicks − 2) ticks − 2 × Latency, derived from
// the failure detectors. A detector takes the leader for dead only after a
// probe it sent went unanswered for TimeoutTicks, and the leader answers
// every probe that reaches it alive; so after a crash no node can elect a
// successor before crash − Latency + TimeoutTicks ticks, and by then the
// crashed leader's Term has ended. Join takes LeaseTTL as the default TTL
// and refuses any other.
//
// A leader renews every HeartbeatTicks: it probes every peer, and a round
// succeeds, counting from its send time, when one peer's node still names
// it leader in its epoch, or when no peer can replace it (every peer
// refused the probe because it is crashed or gone, or takes no part in the
// algorithm). Each outcome reaches the after-renewal hook. A Term ends
//
//   - with ErrLeaseExpired when no round succeeded for its window: the
//     leader is cut off long enough that it may have been replaced;
//   - with ErrPreempted when its node names another leader or epoch, or a
//     peer's names a newer one, or when a better candidate preempts it
//     (WithPreemption, above); with ErrTransferred on Transfer;
//   - with ErrResigned on Resign, ErrClosed on Close, ErrUnhealthy when the
//     before-renewal hook fails, and ErrSessionLost when a crashed leader
//     recovers before its Term lapsed.
//
// A crashed leader's Term is not ended early: it lapses at its deadline,
// exactly as for a paused process that does not know it was cut off.
//
// # Leader and Observe
//
// Leader and Observe report what the member itself believes: the leader
// that last asked it for confirmation and that its node agrees with. It
// stops showing a leader when its node names another or none, when the
// leader resigns, or when the leader has not renewed for its lease window.
// So during a partition, each side's members show their own side's leader.
//
// # Guarantees
//
// Ring, bully, LCR, HS and the tree assume a synchronous network and a
// perfect failure detector (Zab too, but it asks a majority; see below): messages arrive within a known delay and a node that does not
// answer in time has crashed. The cluster keeps that model until you call
// Partition. Of the contract of package election:
//
//   - P1 one leader per token: holds, partitions included (the node part of
//     the token differs).
//   - P2 monotonic fencing: holds for successive leaderships, across
//     crashes, recoveries and rebuilds, as long as some live node remembers
//     the latest epoch (no algorithm without stable storage at a quorum can
//     promise more). Two leaderships that a partition makes concurrent are
//     not successive: their tokens differ but need not be ordered by time.
//   - P3 step down before the lease can lapse: holds without partitions,
//     through the derivation above (the conformance suite and
//     TestFailoverAfterLeaderCrash check it at every crash phase). It does
//     NOT hold under a partition: each side whose members can hear each
//     other elects and renews its own leader, and two Terms are valid at
//     once (TestPartitionElectsTwoLeaders shows it). Only a leader cut off
//     from every peer steps down, when its lease lapses.
//   - P4 no phantom leadership: holds: see Campaign above.
//   - P5 no lost or overlapping callbacks: holds (election.Run).
//   - P6 bounded failover: after Transfer or a preemption, the target
//     leads as soon as the algorithm's messages have gone round, without
//     any timeout, on every algorithm. After Resign, a ring elects the
//     next candidate within one lap of messages; a bully at once when the
//     next candidate outranks every member not standing, and otherwise
//     after TimeoutTicks (a member that does not stand does not answer an
//     Election, and the bully cannot tell silence from death). After a crash: the lease TTL,
//     then the algorithm's election (a ring skips each dead successor after
//     TimeoutTicks).
//   - P7 renewal never fails silently: holds: every round's outcome reaches
//     the after-renewal hook.
//   - P8 garbage fails closed: the network carries only what the cluster's
//     own nodes produce; a message that names an unknown node, or belongs
//     to an older build of the nodes, is dropped (and logged at debug level).
//   - P9 no herd: holds for callers: a leader change wakes only the new
//     leader's Campaign. The algorithms themselves message every member
//     (ring 2N to 3N messages per election, LCR 2N, HS O(N log N), Zab
//     3(N−1), bully up to N², the tree 4E−N+1 = 2N²−3N+1 on the complete
//     graph of the members).
//
// What needs a quorum: P3 under partitions, and with it "one valid Term at
// a time" in general. A leader that keeps its Term only while a majority of
// the members renew it (the Chubby-style quorum lease of the classic
// quorum algorithm) steps down on the minority side of any partition, and
// the majority side waits out its lease before electing; ring, bully, LCR,
// HS and the tree have no majority to ask. Use the token whichever backend you run.
//
// Zab (ZooKeeper's sequence/successor election) asks a majority: a new
// leader needs the ACKs of a majority of the members, so on the minority
// side of a partition no new leader is elected; but, as in the seeds, the
// old leader is not told to step down (there is no lease), so the token,
// not the algorithm, orders the two. For the same reason a Zab cluster of
// two members whose leader crashes elects no one: one is no majority of
// two. The conformance suite runs Zab with a third member that never
// campaigns (a witness), ZooKeeper's smallest useful ensemble; with it, it
// passes every subtest.
//
// Chubby's quorum lease (classic.NewChubby), which would give P3 under
// partitions, is not offered as an Algorithm yet: it runs in the simulator
// (classic/sim checks that no two master leases overlap), but its handover
// waits for a candidate's turn, so it does not pass the conformance suite.
package inmem
