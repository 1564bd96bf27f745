package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/electkit/election/cmd/internal/nemesis"
	"github.com/electkit/election/internal/mono"
)

// storePartition cuts one store member off from the others (the members'
// own traffic: etcd's Raft, ZooKeeper's quorum and election ports) for
// [TTL, 2 TTL + 1 s), then heals:
//
//   - store-partition isolates the store's leader member (under
//     Config.Rate, at the seed's share; else a random member). Half the
//     time (by the seed) the candidates are split too: the election's
//     leader and a seeded half of the others reach only the isolated
//     member, the rest only the majority; otherwise every candidate still
//     reaches every member.
//   - store-minority puts a random member alone on the minority side and
//     the candidates on both sides, each at random, at least one on each
//     when two or more are free of other faults.
//
// The store's own leader moves to the majority; a leader whose candidate
// reaches only the minority cannot renew and must end its Term before the
// majority lets another lead.
func (r *run) storePartition(ctx context.Context, kind string) error {
	if err := r.holdStore(0); err != nil {
		return err
	}
	defer r.releaseStore()
	rng, pick := r.rngOf(ctx), r.pickOf(ctx)
	n := len(r.st.addrs())
	withCandidates := kind == StoreMinority || rng.Intn(2) == 0
	d := r.betweenIn(ctx, r.cfg.TTL, 2*r.cfg.TTL+time.Second)
	iso := r.st.leader()
	if kind == StoreMinority || iso < 0 || !r.leaderShare(ctx) {
		iso = pick.Intn(n)
	}
	sides := make([]int, n)
	sides[iso] = 1
	// The candidates' sides: minority ones reach only iso, the others
	// every member but iso.
	var minority, majority []*proc
	if withCandidates {
		leader := ""
		if ev, ok := r.reg.Leader(); ok {
			leader = ev.Candidate
		}
		for _, p := range r.live("") {
			if !r.take(p) {
				continue
			}
			switch {
			case kind == StorePartition && p.id == leader:
				minority = append(minority, p)
			case pick.Intn(2) == 0:
				minority = append(minority, p)
			default:
				majority = append(majority, p)
			}
		}
		if kind == StoreMinority && len(minority) > 0 && len(majority) == 0 {
			majority, minority = minority[len(minority)-1:], minority[:len(minority)-1]
		}
		if kind == StoreMinority && len(majority) > 0 && len(minority) == 0 {
			minority, majority = majority[len(majority)-1:], majority[:len(majority)-1]
		}
	}
	defer func() {
		for _, p := range append(minority, majority...) {
			r.release(p)
		}
	}()
	name := r.st.memberName(iso)
	before := r.st.leader()
	start := mono.Now()
	r.st.peers().split(sides)
	r.smu.Lock()
	for _, p := range minority {
		for j, px := range p.proxies {
			if j != iso {
				px.Cut()
			}
		}
	}
	for _, p := range majority {
		p.proxies[iso].Cut()
	}
	r.smu.Unlock()
	_ = sleep(ctx, d)
	// The majority elects a leader of its own if the isolated member led:
	// the partition lasts until it has (or a bound passes), so that every
	// partition moves the store's leadership where it must.
	moved := r.majorityLeader(ctx, iso, majorityWait)
	r.st.peers().heal()
	r.smu.Lock()
	for _, p := range append(minority, majority...) {
		p.heal()
	}
	r.smu.Unlock()
	target := name
	if withCandidates {
		target = fmt.Sprintf("%s with %s", name, strings.Join(ids(minority), ","))
	}
	target += fmt.Sprintf("; store leader %s, then %s on the majority side", r.memberOr(before), r.memberOr(moved))
	r.fault(nemesis.Fault{Kind: kind, Target: target, Start: start, End: mono.Now()})
	r.logf("%s: %s cut off from the other members for %v (the store's leader: %s before, %s on the majority side at the end); candidates with it: [%s], with the others: [%s]",
		kind, name, time.Duration(mono.Now()-start).Round(time.Millisecond), r.memberOr(before), r.memberOr(moved), strings.Join(ids(minority), " "), strings.Join(ids(majority), " "))
	return ctx.Err()
}

func ids(ps []*proc) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.id)
	}
	return out
}

// memberOr names member i, or says there is none.
func (r *run) memberOr(i int) string {
	if i < 0 {
		return "none"
	}
	return r.st.memberName(i)
}

// majorityWait bounds how long a partition waits, past its drawn length,
// for the majority to elect a leader of its own (ZooKeeper's followers
// give up on a leader after syncLimit ticks, then elect one). It returns
// as soon as one leads; the bound only serves a loaded machine, where
// three ZooKeeper JVMs beside race-enabled test binaries once took more
// than 10 s.
const majorityWait = 25 * time.Second

// majorityLeader waits, for at most bound, until a member other than iso
// leads the store, and returns it (-1 if none did).
func (r *run) majorityLeader(ctx context.Context, iso int, bound time.Duration) int {
	deadline := time.Now().Add(bound)
	for {
		for i := range r.st.addrs() {
			if i != iso && r.st.isLeader(i) {
				return i
			}
		}
		if time.Now().After(deadline) || sleep(ctx, 100*time.Millisecond) != nil { // polling the members' state
			return -1
		}
	}
}
