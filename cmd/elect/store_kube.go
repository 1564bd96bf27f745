package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/kube"
)

// kubeConn is the Kubernetes backend's flags.
type kubeConn struct {
	kubeconfig string
	namespace  string
	timeout    time.Duration
}

func kubeFlags(f *flagSet, _ bool) opener {
	c := &kubeConn{}
	f.String(&c.kubeconfig, "kubeconfig", "FILE", "", "kube: the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the pod's in-cluster config)")
	f.String(&c.namespace, "namespace", "NS", "", "kube: the Lease's namespace (default: the kubeconfig context's, or the pod's; else default)")
	f.Duration(&c.timeout, "kube-timeout", "D", 10*time.Second, "kube: how long to wait for the API server's first answer")
	return c.open
}

// leaseName is the Lease of the election called name: its path without
// the leading "/", its segments joined by ".", so that
// /services/scheduler is the Lease services.scheduler.
func leaseName(name string) string {
	return strings.ReplaceAll(strings.TrimPrefix(name, "/"), "/", ".")
}

// open reads the kubeconfig (or the in-cluster config) and returns a
// candidate of the Lease named after --name in --namespace.
func (c *kubeConn) open(ctx context.Context, f *flagSet, name string, opts []election.Option) (election.Elector, func() error, error) {
	if c.timeout <= 0 {
		return nil, nil, f.Bad("kube-timeout", "must be positive")
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if c.kubeconfig != "" {
			return nil, nil, f.Bad("kubeconfig", "%v", err)
		}
		return nil, nil, fmt.Errorf("no Kubernetes config (set --kubeconfig or KUBECONFIG, or run in a pod): %w", err)
	}
	ns := c.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("the Kubernetes API server at %s: %w", cfg.Host, err)
	}
	lease := leaseName(name)
	e, err := kube.New(cs.CoordinationV1(), ns, lease, opts...)
	if err != nil {
		var oe *election.OptionError
		if errors.As(err, &oe) {
			switch oe.Field {
			case "name":
				return nil, nil, f.Bad("name", "is the Lease %s on --backend kube, which %s", lease, oe.Reason)
			case "namespace":
				return nil, nil, f.Bad("namespace", "%s", oe.Reason)
			case "TTL":
				return nil, nil, f.Bad("ttl", "%s", oe.Reason)
			}
		}
		return nil, nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	_, err = e.Leader(rctx)
	cancel()
	if err != nil && !errors.Is(err, election.ErrNoLeader) {
		e.Close()
		return nil, nil, fmt.Errorf("the Kubernetes API server at %s: %w", cfg.Host, err)
	}
	return e, e.Close, nil
}
