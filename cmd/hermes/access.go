package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// The access-control commands: whoami, user, token, acl, quota.

func init() {
	clientCommands = append(clientCommands, newWhoAmICmd, newUserCmd, newTokenCmd, newACLCmd, newQuotaCmd)
}

// adminCall runs one call with the flags' connection and credentials.
func adminCall(cmd *cobra.Command, bf *brokerFlags, call func(context.Context, pb.HermesClient) error) error {
	ctx, cancel := bf.context(cmd.Context())
	defer cancel()
	return bf.call(ctx, bf.addr, func(c pb.HermesClient) error { return call(ctx, c) })
}

// whoAmIJSON is `hermes whoami -o json`.
type whoAmIJSON struct {
	Principal    string `json:"principal"`
	Via          string `json:"via"`
	AuthRequired bool   `json:"auth_required"`
}

func newWhoAmICmd() *cobra.Command {
	var (
		bf  brokerFlags
		out outputFlag
	)
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show the principal the node sees for these credentials",
		Example: `  HERMES_PASSWORD=secret hermes whoami --user alice
  hermes whoami -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := out.kind(); err != nil {
				return err
			}
			return adminCall(cmd, &bf, func(ctx context.Context, c pb.HermesClient) error {
				r, err := c.WhoAmI(ctx, &pb.WhoAmIRequest{})
				if err != nil {
					return err
				}
				if k, _ := out.kind(); k != "table" {
					return out.print(cmd.OutOrStdout(), whoAmIJSON{r.Principal, r.Via, r.AuthRequired}, nil)
				}
				name := r.Principal
				if name == "" {
					name = "(anonymous)"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s", name)
				if r.Via != "" {
					fmt.Fprintf(cmd.OutOrStdout(), " (by %s)", r.Via)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "; authentication required: %v\n", r.AuthRequired)
				return nil
			})
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
	return cmd
}

// readPassword takes a password from stdin (one line) or asks for it.
func readPassword(cmd *cobra.Command, fromStdin bool) (string, error) {
	if !fromStdin {
		if pw := os.Getenv("HERMES_NEW_PASSWORD"); pw != "" {
			return pw, nil
		}
		return "", fmt.Errorf("give the new password on stdin with --password-stdin, or in HERMES_NEW_PASSWORD")
	}
	line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("reading the password from stdin: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func newUserCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Manage users (their passwords are kept as SCRAM credentials)",
		Example: `  printf '%s\n' "$PASSWORD" | hermes user create alice --password-stdin
  hermes user list`}
	var stdin bool
	var bf1, bf2, bf3, bf4 brokerFlags
	var out1, out2, out3, out4 outputFlag
	create := &cobra.Command{
		Use: "create NAME", Short: "Create a user", Args: cobra.ExactArgs(1),
		Example: "  printf '%s\\n' \"$PASSWORD\" | hermes user create alice --password-stdin",
		RunE: func(cmd *cobra.Command, args []string) error {
			pw, err := readPassword(cmd, stdin)
			if err != nil {
				return err
			}
			return adminCall(cmd, &bf1, func(ctx context.Context, c pb.HermesClient) error {
				if _, err := c.CreateUser(ctx, &pb.CreateUserRequest{Name: args[0], Password: pw}); err != nil {
					return err
				}
				return out1.done(cmd, map[string]any{"user": args[0], "created": true}, "user %s created\n", args[0])
			})
		},
	}
	bf1.register(create, adminTimeout)
	out1.register(create)
	create.Flags().BoolVar(&stdin, "password-stdin", false, "read the password from stdin (else HERMES_NEW_PASSWORD)")
	passwd := &cobra.Command{
		Use: "passwd NAME", Short: "Change a user's password", Args: cobra.ExactArgs(1),
		Example: "  printf '%s\\n' \"$NEW_PASSWORD\" | hermes user passwd alice --password-stdin",
		RunE: func(cmd *cobra.Command, args []string) error {
			pw, err := readPassword(cmd, stdin)
			if err != nil {
				return err
			}
			return adminCall(cmd, &bf2, func(ctx context.Context, c pb.HermesClient) error {
				if _, err := c.SetPassword(ctx, &pb.SetPasswordRequest{Name: args[0], Password: pw}); err != nil {
					return err
				}
				return out2.done(cmd, map[string]any{"user": args[0], "password_changed": true}, "password of %s changed\n", args[0])
			})
		},
	}
	bf2.register(passwd, adminTimeout)
	out2.register(passwd)
	passwd.Flags().BoolVar(&stdin, "password-stdin", false, "read the password from stdin (else HERMES_NEW_PASSWORD)")
	del := &cobra.Command{
		Use: "delete NAME", Short: "Delete a user and revoke its API tokens", Args: cobra.ExactArgs(1),
		Example: "  hermes user delete alice",
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminCall(cmd, &bf3, func(ctx context.Context, c pb.HermesClient) error {
				if _, err := c.DeleteUser(ctx, &pb.DeleteUserRequest{Name: args[0]}); err != nil {
					return err
				}
				return out3.done(cmd, map[string]any{"user": args[0], "deleted": true}, "user %s deleted\n", args[0])
			})
		},
	}
	bf3.register(del, adminTimeout)
	out3.register(del)
	list := &cobra.Command{
		Use: "list", Short: "List the users", Args: cobra.NoArgs,
		Example: "  hermes user list\n  hermes user list -o json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := out4.kind(); err != nil {
				return err
			}
			return adminCall(cmd, &bf4, func(ctx context.Context, c pb.HermesClient) error {
				r, err := c.ListUsers(ctx, &pb.ListUsersRequest{})
				if err != nil {
					return err
				}
				js := make([]userJSON, 0, len(r.Users))
				for _, u := range r.Users {
					js = append(js, userJSON{u.Name, nonNil(u.Mechanisms)})
				}
				return out4.print(cmd.OutOrStdout(), js, func() error {
					rows := [][]string{{"NAME", "MECHANISMS"}}
					for _, u := range r.Users {
						rows = append(rows, []string{u.Name, strings.Join(u.Mechanisms, ",")})
					}
					return table(cmd.OutOrStdout(), rows)
				})
			})
		},
	}
	bf4.register(list, adminTimeout)
	out4.register(list)
	cmd.AddCommand(create, passwd, del, list)
	return cmd
}

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Manage API tokens",
		Example: `  hermes token create --principal ci --ttl 720h --description "CI publisher"
  hermes token list`}
	var (
		out1, out2    outputFlag
		out3          outputFlag
		bf1, bf2, bf3 brokerFlags
		principal     string
		ttl           time.Duration
		desc          string
	)
	create := &cobra.Command{
		Use: "create", Short: "Create an API token (printed once: keep it)", Args: cobra.NoArgs,
		Example: `  hermes token create --principal ci --ttl 720h --description "CI publisher" > ci-token
  hermes topic list --token "$(cat ci-token)"`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return adminCall(cmd, &bf1, func(ctx context.Context, c pb.HermesClient) error {
				r, err := c.CreateToken(ctx, &pb.CreateTokenRequest{Principal: principal, TtlMs: ttl.Milliseconds(), Description: desc})
				if err != nil {
					return err
				}
				err = out1.done(cmd, map[string]any{"token": r.Token, "id": r.Info.Id, "principal": r.Info.Principal,
					"expires_unix_ms": r.Info.ExpiresUnixMs}, "%s\n", r.Token)
				fmt.Fprintf(cmd.ErrOrStderr(), "token %s for %s created; it is shown only now\n", r.Info.Id, r.Info.Principal)
				return err
			})
		},
	}
	bf1.register(create, adminTimeout)
	out1.register(create)
	create.Flags().StringVar(&principal, "principal", "", "the token's principal (default: the caller)")
	create.Flags().DurationVar(&ttl, "ttl", 0, "expire after this long (0: never)")
	create.Flags().StringVar(&desc, "description", "", "what the token is for")
	revoke := &cobra.Command{
		Use: "revoke ID", Short: "Revoke an API token", Args: cobra.ExactArgs(1),
		Example: "  hermes token revoke 0f3c2a9e",
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminCall(cmd, &bf2, func(ctx context.Context, c pb.HermesClient) error {
				if _, err := c.RevokeToken(ctx, &pb.RevokeTokenRequest{Id: args[0]}); err != nil {
					return err
				}
				return out2.done(cmd, map[string]any{"id": args[0], "revoked": true}, "token %s revoked\n", args[0])
			})
		},
	}
	bf2.register(revoke, adminTimeout)
	out2.register(revoke)
	list := &cobra.Command{
		Use: "list", Short: "List API tokens (never their secrets)", Args: cobra.NoArgs,
		Example: "  hermes token list\n  hermes token list -o yaml",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := out3.kind(); err != nil {
				return err
			}
			return adminCall(cmd, &bf3, func(ctx context.Context, c pb.HermesClient) error {
				r, err := c.ListTokens(ctx, &pb.ListTokensRequest{})
				if err != nil {
					return err
				}
				if k, _ := out3.kind(); k != "table" {
					js := make([]tokenJSON, 0, len(r.Tokens))
					for _, t := range r.Tokens {
						js = append(js, tokenJSON{t.Id, t.Principal, t.CreatedUnixMs, t.ExpiresUnixMs, t.Description})
					}
					return out3.print(cmd.OutOrStdout(), js, nil)
				}
				rows := [][]string{{"ID", "PRINCIPAL", "CREATED", "EXPIRES", "DESCRIPTION"}}
				for _, t := range r.Tokens {
					exp := "never"
					if t.ExpiresUnixMs != 0 {
						exp = time.UnixMilli(t.ExpiresUnixMs).UTC().Format(time.RFC3339)
					}
					rows = append(rows, []string{t.Id, t.Principal, time.UnixMilli(t.CreatedUnixMs).UTC().Format(time.RFC3339), exp, t.Description})
				}
				return table(cmd.OutOrStdout(), rows)
			})
		},
	}
	bf3.register(list, adminTimeout)
	out3.register(list)
	cmd.AddCommand(create, revoke, list)
	return cmd
}

type userJSON struct {
	Name       string   `json:"name"`
	Mechanisms []string `json:"mechanisms"`
}

type tokenJSON struct {
	ID            string `json:"id"`
	Principal     string `json:"principal"`
	CreatedUnixMs int64  `json:"created_unix_ms"`
	// 0: never.
	ExpiresUnixMs int64  `json:"expires_unix_ms"`
	Description   string `json:"description"`
}

type aclJSON struct {
	Principal  string `json:"principal"`
	Permission string `json:"permission"`
	Operation  string `json:"operation"`
	Resource   string `json:"resource"`
	Name       string `json:"name"`
	Pattern    string `json:"pattern"`
	Host       string `json:"host"`
}

type quotaJSON struct {
	Principal             string `json:"principal"`
	ProduceBytesPerSecond int64  `json:"produce_bytes_per_second"`
	FetchBytesPerSecond   int64  `json:"fetch_bytes_per_second"`
	RequestsPerSecond     int64  `json:"requests_per_second"`
}

// aclFlags are the flags naming an ACL or a filter.
type aclFlags struct {
	principal, resource, name, operation, host string
	prefix, deny, allow                        bool
}

func (f *aclFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.principal, "principal", "", "principal name, or * for every principal")
	fs.StringVar(&f.resource, "resource", "", "resource type: topic, group, cluster or transactional-id")
	fs.StringVar(&f.name, "name", "", "resource name (* for all of the type), or with --prefix a name prefix")
	fs.BoolVar(&f.prefix, "prefix", false, "--name is a prefix")
	fs.StringVar(&f.operation, "operation", "", "read, write, create, delete, alter, describe or all")
	fs.BoolVar(&f.allow, "allow", false, "allow")
	fs.BoolVar(&f.deny, "deny", false, "deny (wins over allow)")
	fs.StringVar(&f.host, "host", "", "client address the ACL applies to (default: any)")
}

var resourceTypes = map[string]pb.ResourceType{"topic": pb.ResourceType_RESOURCE_TYPE_TOPIC, "group": pb.ResourceType_RESOURCE_TYPE_GROUP,
	"cluster": pb.ResourceType_RESOURCE_TYPE_CLUSTER, "transactional-id": pb.ResourceType_RESOURCE_TYPE_TRANSACTIONAL_ID}

var operations = map[string]pb.Operation{"read": pb.Operation_OPERATION_READ, "write": pb.Operation_OPERATION_WRITE,
	"create": pb.Operation_OPERATION_CREATE, "delete": pb.Operation_OPERATION_DELETE, "alter": pb.Operation_OPERATION_ALTER,
	"describe": pb.Operation_OPERATION_DESCRIBE, "all": pb.Operation_OPERATION_ALL}

// acl converts the flags (as a filter, absent ones match anything).
func (f *aclFlags) acl(filter bool) (*pb.Acl, error) {
	a := &pb.Acl{Principal: f.principal, Name: f.name, Host: f.host}
	if f.resource != "" {
		t, ok := resourceTypes[strings.ToLower(f.resource)]
		if !ok {
			return nil, fmt.Errorf("--resource %q: topic, group, cluster or transactional-id", f.resource)
		}
		a.ResourceType = t
	}
	if f.operation != "" {
		op, ok := operations[strings.ToLower(f.operation)]
		if !ok {
			return nil, fmt.Errorf("--operation %q: read, write, create, delete, alter, describe or all", f.operation)
		}
		a.Operation = op
	}
	if f.prefix {
		a.Pattern = pb.PatternType_PATTERN_TYPE_PREFIX
	} else if !filter {
		a.Pattern = pb.PatternType_PATTERN_TYPE_LITERAL
	}
	switch {
	case f.allow && f.deny:
		return nil, fmt.Errorf("--allow or --deny, not both")
	case f.allow:
		a.Permission = pb.Permission_PERMISSION_ALLOW
	case f.deny:
		a.Permission = pb.Permission_PERMISSION_DENY
	case !filter:
		return nil, fmt.Errorf("--allow or --deny is needed")
	}
	if !filter && (a.Principal == "" || a.ResourceType == 0 || a.Operation == 0) {
		return nil, fmt.Errorf("an ACL needs --principal, --resource and --operation (and --name, but for the cluster)")
	}
	return a, nil
}

func newACLCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "acl", Short: "Manage ACLs: deny wins over allow; what no ACL allows is denied",
		Example: `  hermes acl add --principal alice --allow --operation write --resource topic --name orders
  hermes acl list --principal alice`}
	var (
		out1, out2    outputFlag
		out3          outputFlag
		bf1, bf2, bf3 brokerFlags
		af1, af2, af3 aclFlags
	)
	add := &cobra.Command{
		Use: "add", Short: "Add an ACL", Args: cobra.NoArgs,
		Example: "  hermes acl add --principal alice --allow --operation write --resource topic --name orders\n" +
			"  hermes acl add --principal alice --allow --operation read --resource topic --name logs- --prefix",
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := af1.acl(false)
			if err != nil {
				return err
			}
			return adminCall(cmd, &bf1, func(ctx context.Context, c pb.HermesClient) error {
				if _, err := c.CreateAcls(ctx, &pb.CreateAclsRequest{Acls: []*pb.Acl{a}}); err != nil {
					return err
				}
				return out1.done(cmd, map[string]any{"added": 1}, "ACL added\n")
			})
		},
	}
	bf1.register(add, adminTimeout)
	out1.register(add)
	af1.register(add)
	remove := &cobra.Command{
		Use: "remove", Short: "Remove the ACLs the flags match (absent flags match anything)", Args: cobra.NoArgs,
		Example: "  hermes acl remove --principal alice --resource topic --name orders",
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := af2.acl(true)
			if err != nil {
				return err
			}
			return adminCall(cmd, &bf2, func(ctx context.Context, c pb.HermesClient) error {
				r, err := c.DeleteAcls(ctx, &pb.DeleteAclsRequest{Filters: []*pb.Acl{a}})
				if err != nil {
					return err
				}
				return out2.done(cmd, map[string]any{"removed": r.Deleted}, "%d ACLs removed\n", r.Deleted)
			})
		},
	}
	bf2.register(remove, adminTimeout)
	out2.register(remove)
	af2.register(remove)
	list := &cobra.Command{
		Use: "list", Short: "List the ACLs the flags match", Args: cobra.NoArgs,
		Example: "  hermes acl list\n  hermes acl list --principal alice -o json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := af3.acl(true)
			if err != nil {
				return err
			}
			if _, err := out3.kind(); err != nil {
				return err
			}
			return adminCall(cmd, &bf3, func(ctx context.Context, c pb.HermesClient) error {
				r, err := c.ListAcls(ctx, &pb.ListAclsRequest{Filter: a})
				if err != nil {
					return err
				}
				js := make([]aclJSON, 0, len(r.Acls))
				for _, a := range r.Acls {
					host := a.Host
					if host == "" {
						host = "*"
					}
					js = append(js, aclJSON{a.Principal, enumName(a.Permission.String(), "PERMISSION_"), enumName(a.Operation.String(), "OPERATION_"),
						enumName(a.ResourceType.String(), "RESOURCE_TYPE_"), a.Name, enumName(a.Pattern.String(), "PATTERN_TYPE_"), host})
				}
				return out3.print(cmd.OutOrStdout(), js, func() error {
					rows := [][]string{{"PRINCIPAL", "PERMISSION", "OPERATION", "RESOURCE", "NAME", "PATTERN", "HOST"}}
					for _, a := range js {
						rows = append(rows, []string{a.Principal, a.Permission, a.Operation, a.Resource, a.Name, a.Pattern, a.Host})
					}
					return table(cmd.OutOrStdout(), rows)
				})
			})
		},
	}
	bf3.register(list, adminTimeout)
	out3.register(list)
	af3.register(list)
	cmd.AddCommand(add, remove, list)
	return cmd
}

func enumName(s, prefix string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s, prefix)), "_", "-")
}

func newQuotaCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "quota", Short: "Manage quotas per principal and node",
		Example: `  hermes quota set alice --produce-bytes-per-second 1048576
  hermes quota list`}
	var (
		out1     outputFlag
		out2     outputFlag
		bf1, bf2 brokerFlags
		q        pb.Quota
	)
	set := &cobra.Command{
		Use: "set PRINCIPAL", Short: "Set a principal's quota (* for principals without their own; all 0 removes it)", Args: cobra.ExactArgs(1),
		Example: "  hermes quota set alice --produce-bytes-per-second 1048576 --requests-per-second 1000",
		RunE: func(cmd *cobra.Command, args []string) error {
			q.Principal = args[0]
			return adminCall(cmd, &bf1, func(ctx context.Context, c pb.HermesClient) error {
				if _, err := c.SetQuota(ctx, &pb.SetQuotaRequest{Quota: &q}); err != nil {
					return err
				}
				return out1.done(cmd, map[string]any{"principal": args[0], "set": true}, "quota of %s set\n", args[0])
			})
		},
	}
	bf1.register(set, adminTimeout)
	out1.register(set)
	set.Flags().Int64Var(&q.ProduceBytesPerSecond, "produce-bytes-per-second", 0, "record bytes published per second on each node (0: no limit)")
	set.Flags().Int64Var(&q.FetchBytesPerSecond, "fetch-bytes-per-second", 0, "record bytes read per second on each node (0: no limit)")
	set.Flags().Int64Var(&q.RequestsPerSecond, "requests-per-second", 0, "requests per second on each node (0: no limit)")
	list := &cobra.Command{
		Use: "list", Short: "List the quotas", Args: cobra.NoArgs,
		Example: "  hermes quota list\n  hermes quota list -o json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := out2.kind(); err != nil {
				return err
			}
			return adminCall(cmd, &bf2, func(ctx context.Context, c pb.HermesClient) error {
				r, err := c.ListQuotas(ctx, &pb.ListQuotasRequest{})
				if err != nil {
					return err
				}
				js := make([]quotaJSON, 0, len(r.Quotas))
				for _, q := range r.Quotas {
					js = append(js, quotaJSON{q.Principal, q.ProduceBytesPerSecond, q.FetchBytesPerSecond, q.RequestsPerSecond})
				}
				return out2.print(cmd.OutOrStdout(), js, func() error {
					rows := [][]string{{"PRINCIPAL", "PRODUCE B/S", "FETCH B/S", "REQUESTS/S"}}
					for _, q := range js {
						rows = append(rows, []string{q.Principal, itoa(q.ProduceBytesPerSecond), itoa(q.FetchBytesPerSecond), itoa(q.RequestsPerSecond)})
					}
					return table(cmd.OutOrStdout(), rows)
				})
			})
		},
	}
	bf2.register(list, adminTimeout)
	out2.register(list)
	cmd.AddCommand(set, list)
	return cmd
}
