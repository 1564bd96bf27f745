// Package naive is the election everyone writes first, measured for the
// herd comparison: one leader key; whoever creates it leads; everyone else
// watches that key and, when it goes, all of them rush to create it again.
// On etcd the key is bound to the candidate's lease; on ZooKeeper it is an
// ephemeral node.
package naive

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	gozk "github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election/bench/internal/conns"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/internal/mono"
)

// NewEtcd returns the naive election on etcd.
func NewEtcd(endpoints []string, o conns.Options) peer.Library {
	return &library{name: "naive (etcd)", d: conns.NewEtcd(endpoints, o)}
}

// NewZK returns the naive election on ZooKeeper.
func NewZK(servers []string, o conns.Options) peer.Library {
	return &library{name: "naive (zk)", d: conns.NewZK(servers, o), zk: true}
}

type library struct {
	name string
	d    *conns.Dialer
	zk   bool
}

func (l *library) Name() string { return l.name }

func (l *library) Counts() peer.Counts { return l.d.Counts() }

func (l *library) Close() error { return l.d.Close() }

func (l *library) NewCandidate(ctx context.Context, name, id string, ttl time.Duration) (peer.Candidate, error) {
	c, err := l.d.Get(ttl)
	if err != nil {
		return nil, err
	}
	if l.zk {
		if err := ensurePath(c.ZK, name); err != nil {
			c.Close()
			return nil, err
		}
		return &zkCandidate{c: c, key: name + "/leader", id: id}, nil
	}
	lease, err := c.Etcd.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("naive: grant: %w", err)
	}
	kctx, stop := context.WithCancel(context.Background())
	ka, err := c.Etcd.KeepAlive(kctx, lease.ID)
	if err != nil {
		stop()
		c.Close()
		return nil, fmt.Errorf("naive: keepalive: %w", err)
	}
	go func() {
		for range ka {
		}
	}()
	return &etcdCandidate{c: c, key: name + "/leader", id: id, lease: lease.ID, stop: stop}, nil
}

type etcdCandidate struct {
	c       *conns.Conn
	key, id string
	lease   clientv3.LeaseID
	stop    context.CancelFunc
	crashed bool
}

func (e *etcdCandidate) Campaign(ctx context.Context) (int64, error) {
	cli := e.c.Etcd
	for {
		r, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(e.key), "=", 0)).
			Then(clientv3.OpPut(e.key, e.id, clientv3.WithLease(e.lease))).
			Commit()
		if err != nil {
			return 0, err
		}
		if r.Succeeded {
			return mono.Now(), nil
		}
		// Everyone watches the one key.
		wctx, cancel := context.WithCancel(ctx)
		wch := cli.Watch(wctx, e.key, clientv3.WithRev(r.Header.Revision+1), clientv3.WithFilterPut())
		gone := false
		for !gone {
			select {
			case wr, ok := <-wch:
				if !ok {
					gone = true // the watch ended: try again
					break
				}
				if err := wr.Err(); err != nil {
					cancel()
					return 0, err
				}
				for _, ev := range wr.Events {
					if ev.Type == clientv3.EventTypeDelete {
						gone = true
					}
				}
			case <-ctx.Done():
				cancel()
				return 0, ctx.Err()
			}
		}
		cancel()
	}
}

func (e *etcdCandidate) Release(ctx context.Context) (int64, error) {
	t := mono.Now()
	_, err := e.c.Etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(e.key), "=", e.lease)).
		Then(clientv3.OpDelete(e.key)).Commit()
	return t, err
}

func (e *etcdCandidate) Crash() (int64, error) {
	e.crashed = true
	return e.c.Cut()
}

func (e *etcdCandidate) Counts() peer.Counts { return e.c.Counts() }

func (e *etcdCandidate) Close() error {
	e.stop()
	if !e.crashed {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = e.c.Etcd.Revoke(ctx, e.lease)
		cancel()
	}
	e.c.Close()
	return nil
}

type zkCandidate struct {
	c       *conns.Conn
	key, id string
}

func (z *zkCandidate) Campaign(ctx context.Context) (int64, error) {
	conn := z.c.ZK
	for {
		_, err := conn.Create(z.key, []byte(z.id), gozk.FlagEphemeral, gozk.WorldACL(gozk.PermAll))
		if err == nil {
			return mono.Now(), nil
		}
		if !errors.Is(err, gozk.ErrNodeExists) {
			return 0, err
		}
		// Everyone watches the one node.
		ok, _, ch, err := conn.ExistsW(z.key)
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func (z *zkCandidate) Release(ctx context.Context) (int64, error) {
	t := mono.Now()
	data, st, err := z.c.ZK.Get(z.key)
	if err != nil {
		return t, err
	}
	if string(data) != z.id {
		return t, errors.New("naive: not the leader")
	}
	return t, z.c.ZK.Delete(z.key, st.Version)
}

func (z *zkCandidate) Crash() (int64, error) { return z.c.Cut() }

func (z *zkCandidate) Counts() peer.Counts { return z.c.Counts() }

func (z *zkCandidate) Close() error {
	z.c.Close()
	return nil
}

// ensurePath creates path and its missing parents.
func ensurePath(conn *gozk.Conn, path string) error {
	p := ""
	for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
		p += "/" + part
		_, err := conn.Create(p, nil, 0, gozk.WorldACL(gozk.PermAll))
		if err != nil && !errors.Is(err, gozk.ErrNodeExists) {
			return fmt.Errorf("naive: create %s: %w", p, err)
		}
	}
	return nil
}
