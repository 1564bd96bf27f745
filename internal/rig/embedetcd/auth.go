package embedetcd

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// rootName is the name of etcd's superuser and of its built-in role.
const rootName = "root"

// EnableAuth adds the user "root" with the given password, grants it etcd's
// built-in "root" role, and turns authentication on. From then on clients
// must log in (clientv3.Config.Username and Password); a client that presents
// a TLS client certificate but no password acts as the user named by the
// certificate's common name.
func EnableAuth(ctx context.Context, cli *clientv3.Client, rootPassword string) error {
	if err := checkArgs(ctx, cli); err != nil {
		return err
	}
	if rootPassword == "" {
		return errors.New("embedetcd: EnableAuth: root password is empty")
	}
	if _, err := cli.UserAdd(ctx, rootName, rootPassword); err != nil {
		return fmt.Errorf("embedetcd: adding user %q: %w", rootName, err)
	}
	if _, err := cli.UserGrantRole(ctx, rootName, rootName); err != nil {
		return fmt.Errorf("embedetcd: granting role %q to user %q: %w", rootName, rootName, err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("embedetcd: enabling auth: %w", err)
	}
	return nil
}

// AddUser adds a user with the given password whose only permission is to
// read and write the keys that start with prefix: it creates the role
// "<user>-role", grants it READWRITE on the range
// [prefix, clientv3.GetPrefixRangeEnd(prefix)), and grants the role to the
// user. cli must be allowed to manage users, e.g. be logged in as root.
func AddUser(ctx context.Context, cli *clientv3.Client, user, password, prefix string) error {
	if err := checkArgs(ctx, cli); err != nil {
		return err
	}
	switch {
	case user == "":
		return errors.New("embedetcd: AddUser: user name is empty")
	case password == "":
		return fmt.Errorf("embedetcd: AddUser: password of user %q is empty", user)
	case prefix == "":
		return fmt.Errorf("embedetcd: AddUser: key prefix of user %q is empty (it would grant every key)", user)
	}
	role := user + "-role"
	if _, err := cli.RoleAdd(ctx, role); err != nil {
		return fmt.Errorf("embedetcd: adding role %q: %w", role, err)
	}
	perm := clientv3.PermissionType(clientv3.PermReadWrite)
	if _, err := cli.RoleGrantPermission(ctx, role, prefix, clientv3.GetPrefixRangeEnd(prefix), perm); err != nil {
		return fmt.Errorf("embedetcd: granting role %q read-write on prefix %q: %w", role, prefix, err)
	}
	if _, err := cli.UserAdd(ctx, user, password); err != nil {
		return fmt.Errorf("embedetcd: adding user %q: %w", user, err)
	}
	if _, err := cli.UserGrantRole(ctx, user, role); err != nil {
		return fmt.Errorf("embedetcd: granting role %q to user %q: %w", role, user, err)
	}
	return nil
}

// checkArgs rejects a nil context or client.
func checkArgs(ctx context.Context, cli *clientv3.Client) error {
	if ctx == nil {
		return errors.New("embedetcd: context is nil")
	}
	if cli == nil {
		return errors.New("embedetcd: client is nil")
	}
	return nil
}
