package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/kube"
	"github.com/electkit/election/internal/rig/kubetest"
)

// kubeElection is the election's Lease; the side elections' Leases are
// named after it (KubeLease).
const kubeElection = "nemesis-election"

// KubeNamespace is the namespace of the kube runs' Leases.
const KubeNamespace = "default"

// kubeRole is the Role (and RoleBinding) that lets the candidates' user
// (kubetest.LimitedUser) use Leases in KubeNamespace; the operator
// nemesis deletes the binding and creates it again.
const kubeRole = "nemesis-candidates"

// KubeLease is the Lease of the election called name: a Lease name is a
// DNS subdomain, so a shard's NAME-shard/007 is NAME-shard.007.
func KubeLease(name string) string {
	return strings.ReplaceAll(strings.TrimPrefix(name, "/"), "/", ".")
}

// kubeStore is one kube-apiserver (over an etcd embedded in this
// process): the store's one member, killed and restarted by store-kill. The
// candidates log in as kubetest.LimitedUser, whom RBAC lets use Leases.
type kubeStore struct {
	srv   *kubetest.Server
	dir   string
	admin *kubernetes.Clientset
}

func startKube(dir string) (*kubeStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	srv, err := kubetest.Start(dir)
	if err != nil {
		return nil, err
	}
	admin, err := kubetest.Client(srv.Addr, kubetest.AdminToken)
	if err != nil {
		srv.Close()
		return nil, err
	}
	s := &kubeStore{srv: srv, dir: dir, admin: admin}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: kubeRole, Namespace: KubeNamespace},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			Verbs: []string{"get", "list", "watch", "create", "update", "delete"}}},
	}
	if _, err := admin.RbacV1().Roles(KubeNamespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		srv.Close()
		return nil, fmt.Errorf("creating the candidates' Role: %w", err)
	}
	if err := s.bind(ctx); err != nil {
		srv.Close()
		return nil, err
	}
	return s, nil
}

// bind lets the candidates' user use Leases (the Role's binding).
func (s *kubeStore) bind(ctx context.Context) error {
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: kubeRole, Namespace: KubeNamespace},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: kubetest.LimitedUser}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: kubeRole},
	}
	_, err := s.admin.RbacV1().RoleBindings(KubeNamespace).Create(ctx, rb, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("binding the candidates' Role: %w", err)
	}
	return nil
}

func (s *kubeStore) addrs() []string { return []string{s.srv.Addr} }

// endpoint is the proxy's address: the candidate speaks https to it.
func (s *kubeStore) endpoint(a string) string { return a }

func (s *kubeStore) election() string      { return kubeElection }
func (s *kubeStore) memberName(int) string { return "kube-apiserver" }
func (s *kubeStore) peers() *peerNet       { return nil } // one server: no store partitions (Kinds)

// credentials: the candidates' user and its bearer token.
func (s *kubeStore) credentials() (string, string) {
	return kubetest.LimitedUser, kubetest.LimitedToken
}

func (s *kubeStore) leader() int {
	if s.srv.Running() {
		return 0
	}
	return -1
}

func (s *kubeStore) isLeader(i int) bool { return i == 0 && s.srv.Running() }

// stopMember kills the API server: a graceful stop would drain its
// requests and watches for seconds first.
func (s *kubeStore) stopMember(int) error { s.srv.Kill(); return nil }

func (s *kubeStore) startMember(int) error { return s.srv.Resume() }

func (s *kubeStore) close() { s.srv.Close() }

// expire deletes a waiting candidate's record, as kubectl delete lease
// does: the candidate registers anew at its next renewal.
func (s *kubeStore) expire(ctx context.Context, rng *rand.Rand, leaderID string) (string, bool, error) {
	l, err := s.admin.CoordinationV1().Leases(KubeNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", true, err
	}
	var recs []coordinationv1.Lease
	for _, x := range l.Items {
		if strings.HasPrefix(x.Name, kubeElection+"-c-") && x.Spec.HolderIdentity != nil && *x.Spec.HolderIdentity != leaderID {
			recs = append(recs, x)
		}
	}
	if len(recs) == 0 {
		return "", true, errors.New("no waiting candidate's record")
	}
	rec := recs[rng.Intn(len(recs))]
	err = s.admin.CoordinationV1().Leases(KubeNamespace).Delete(ctx, rec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rec.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		err = nil // it went meanwhile
	}
	return *rec.Spec.HolderIdentity, true, err
}

// garbage writes Leases that are no candidate's: a record of the
// election whose holder is not a valid ID, one that lapsed long ago, and
// another election's Lease held by an invalid ID.
func (s *kubeStore) garbage(ctx context.Context, rng *rand.Rand) (func(context.Context) error, error) {
	n := rng.Int63()
	leases := s.admin.CoordinationV1().Leases(KubeNamespace)
	label, err := s.candidateLabel(ctx)
	if err != nil {
		return nil, err
	}
	past := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	now := metav1.NewMicroTime(time.Now())
	hour, sec := int32(3600), int32(1)
	bad, stray := "bad id!", "stray"
	objs := []*coordinationv1.Lease{
		{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-c-garbage%d", kubeElection, n), Labels: map[string]string{kube.CandidateLabel: label, "nemesis": "garbage"},
			Annotations: map[string]string{kube.CandidateAnnotation: `{"priority":"-9223372036854775808"}`}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &bad, LeaseDurationSeconds: &hour, RenewTime: &now}},
		{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-c-stray%d", kubeElection, n), Labels: map[string]string{kube.CandidateLabel: label, "nemesis": "garbage"},
			Annotations: map[string]string{kube.CandidateAnnotation: `{"priority":"1000000"}`}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &stray, LeaseDurationSeconds: &sec, RenewTime: &past}},
		{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-garbage%d", kubeElection, n), Labels: map[string]string{"nemesis": "garbage"},
			Annotations: map[string]string{kube.Annotation: "not a term"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &bad, LeaseDurationSeconds: &hour, RenewTime: &now}},
	}
	remove := func(ctx context.Context) error {
		return leases.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "nemesis=garbage"})
	}
	for _, o := range objs {
		if _, err := leases.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			return remove, err
		}
	}
	return remove, nil
}

// candidateLabel is the label value of the election's candidate records,
// as a record the candidates wrote shows it.
func (s *kubeStore) candidateLabel(ctx context.Context) (string, error) {
	l, err := s.admin.CoordinationV1().Leases(KubeNamespace).List(ctx, metav1.ListOptions{LabelSelector: kube.CandidateLabel})
	if err != nil {
		return "", err
	}
	for _, x := range l.Items {
		if strings.HasPrefix(x.Name, kubeElection+"-c-") {
			return x.Labels[kube.CandidateLabel], nil
		}
	}
	return "none", nil // no record now: the garbage is then only stray
}

// operator does what kubectl can do to the election's Lease: delete it,
// edit its holderIdentity (to nobody or to a waiting candidate) or its
// renewTime, or take the candidates' RBAC permission away (undone by
// granting it again).
func (s *kubeStore) operator(ctx context.Context, rng *rand.Rand, leaderID string, a *act) (string, func(context.Context) error, error) {
	leases := s.admin.CoordinationV1().Leases(KubeNamespace)
	switch action := rng.Intn(5); action {
	case 0:
		err := a.do(func() error { return leases.Delete(ctx, kubeElection, metav1.DeleteOptions{}) })
		if apierrors.IsNotFound(err) {
			err = nil
		}
		return "kubectl delete lease " + kubeElection + " (leader " + leaderID + ")", nil, err
	case 4:
		undo := func(ctx context.Context) error { return s.bind(ctx) }
		err := a.do(func() error {
			return s.admin.RbacV1().RoleBindings(KubeNamespace).Delete(ctx, kubeRole, metav1.DeleteOptions{})
		})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		return "delete the RoleBinding that lets the candidates use Leases (leader " + leaderID + ")", undo, err
	default:
		var what string
		err := s.edit(ctx, a, func(l *coordinationv1.Lease) {
			switch action {
			case 1:
				empty := ""
				l.Spec.HolderIdentity = &empty
				what = "kubectl edit: holderIdentity emptied"
			case 2:
				other := "nemesis-operator"
				l.Spec.HolderIdentity = &other
				what = "kubectl edit: holderIdentity set to nemesis-operator"
			case 3:
				t := metav1.NewMicroTime(time.Now().Add(-time.Hour))
				l.Spec.RenewTime = &t
				what = "kubectl edit: renewTime an hour back"
			}
		})
		return what + " (leader " + leaderID + ")", nil, err
	}
}

// edit changes the Lease as kubectl edit does: read, change, update
// conditional on the version read, again on a conflict.
func (s *kubeStore) edit(ctx context.Context, a *act, change func(*coordinationv1.Lease)) error {
	leases := s.admin.CoordinationV1().Leases(KubeNamespace)
	for {
		l, err := leases.Get(ctx, kubeElection, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		change(l)
		err = a.do(func() error { _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); return err })
		if !apierrors.IsConflict(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func (s *kubeStore) transfer(ctx context.Context, to string) (election.Leader, error) {
	e, err := kube.New(s.admin.CoordinationV1(), KubeNamespace, kubeElection, election.WithID("nemesis-operator"))
	if err != nil {
		return election.Leader{}, err
	}
	defer e.Close()
	return election.RequestTransfer(ctx, e, to)
}

// leaders reads each election's leader with an Elector per election that
// never campaigns.
func (s *kubeStore) leaders(ctx context.Context, names []string) (map[string]sideLeader, error) {
	out := map[string]sideLeader{}
	for _, name := range names {
		e, err := kube.New(s.admin.CoordinationV1(), KubeNamespace, KubeLease(name), election.WithID("nemesis-observer"))
		if err != nil {
			return out, err
		}
		l, err := e.Leader(ctx)
		e.Close()
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		out[name] = sideLeader{id: l.ID, err: err}
	}
	return out, nil
}
