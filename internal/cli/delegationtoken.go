package cli

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// gregor delegation-token create|renew|expire|describe: kafka-delegation-tokens.sh. Tokens
// are asked for over an authenticated connection (SASL, or SSL with a client certificate:
// --command-config), as the broker refuses them otherwise. The HMAC is shown and taken in
// base64, as Kafka's tool does; a client authenticates with SCRAM as the token id, with the
// HMAC as password and tokenauth=true.

func newDelegationTokenCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:     "delegation-token",
		Aliases: []string{"delegation-tokens"},
		Short:   "Create, renew, expire and describe delegation tokens (kafka-delegation-tokens.sh)",
	}
	cf.register(cmd)
	cmd.AddCommand(newTokenCreateCommand(&cf), newTokenRenewCommand(&cf), newTokenExpireCommand(&cf), newTokenDescribeCommand(&cf))
	return cmd
}

// principalFlag parses "Type:Name" (Type defaults to User).
func principalFlag(s string) (typ, name string, err error) {
	typ, name, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return "User", typ, nil
	}
	if typ == "" || name == "" {
		return "", "", fmt.Errorf("principal %q: want Type:Name, e.g. User:alice", s)
	}
	return typ, name, nil
}

// tokenRow is one token as the tool shows it.
type tokenRow struct {
	TokenID   string   `json:"token_id"`
	HMAC      string   `json:"hmac"`
	Owner     string   `json:"owner"`
	Requester string   `json:"requester"`
	Renewers  []string `json:"renewers"`
	Issued    int64    `json:"issue_timestamp"`
	Expiry    int64    `json:"expiry_timestamp"`
	Max       int64    `json:"max_timestamp"`
}

func printTokens(cmd *cobra.Command, format string, rows []tokenRow) error {
	w := cmd.OutOrStdout()
	if format == outputJSON {
		if rows == nil {
			rows = []tokenRow{}
		}
		return writeJSON(w, map[string]any{"tokens": rows})
	}
	t := newTable(w, "TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE")
	date := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04Z") }
	for _, r := range rows {
		t.row(r.TokenID, r.HMAC, r.Owner, r.Requester, "["+strings.Join(r.Renewers, ",")+"]", date(r.Issued), date(r.Expiry), date(r.Max))
	}
	return t.flush()
}

// tokenError is a token request's error with the broker's name for it.
func tokenError(what string, code int16) error {
	if err := kerr.ErrorForCode(code); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func newTokenCreateCommand(cf *clientFlags) *cobra.Command {
	var renewers []string
	var owner string
	var maxLife int64
	cmd := &cobra.Command{
		Use:          "create [--max-life-time-period MS] [--renewer-principal User:NAME ...] [--owner-principal User:NAME]",
		Short:        "Create a delegation token",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := kmsg.NewPtrCreateDelegationTokenRequest()
			req.MaxLifetimeMillis = maxLife
			named := []string{}
			for _, r := range renewers {
				typ, name, err := principalFlag(r)
				if err != nil {
					return err
				}
				rn := kmsg.NewCreateDelegationTokenRequestRenewer()
				rn.PrincipalType, rn.PrincipalName = typ, name
				req.Renewers = append(req.Renewers, rn)
				named = append(named, typ+":"+name)
			}
			if owner != "" {
				typ, name, err := principalFlag(owner)
				if err != nil {
					return err
				}
				req.OwnerPrincipalType, req.OwnerPrincipalName = &typ, &name
			}
			return adminClientRun(cmd, cf, func(ctx context.Context, _ *kadm.Client, cl *kgo.Client, format string) error {
				r, err := req.RequestWith(ctx, cl)
				if err != nil {
					return fmt.Errorf("creating a delegation token: %w", err)
				}
				if err := tokenError("creating a delegation token", r.ErrorCode); err != nil {
					return err
				}
				return printTokens(cmd, format, []tokenRow{{
					TokenID: r.TokenID, HMAC: base64.StdEncoding.EncodeToString(r.HMAC),
					Owner: r.PrincipalType + ":" + r.PrincipalName, Requester: r.TokenRequesterPrincipalType + ":" + r.TokenRequesterPrincipalName,
					Renewers: named, Issued: r.IssueTimestamp, Expiry: r.ExpiryTimestamp, Max: r.MaxTimestamp,
				}})
			})
		},
	}
	cmd.Flags().Int64Var(&maxLife, "max-life-time-period", -1, "most the token may live, in ms (-1: delegation.token.max.lifetime.ms)")
	cmd.Flags().StringArrayVar(&renewers, "renewer-principal", nil, "a principal that may renew the token (repeatable)")
	cmd.Flags().StringVar(&owner, "owner-principal", "", "the token's owner, when not the caller (needs CREATE_TOKENS on that user)")
	return cmd
}

// tokenChange is renew and expire: the token's HMAC and a period.
func tokenChange(cf *clientFlags, use, short, periodFlag, periodUsage string, send func(ctx context.Context, cl *kgo.Client, mac []byte, period int64) (int16, int64, error)) *cobra.Command {
	var hmacB64 string
	var period int64
	cmd := &cobra.Command{
		Use:          use,
		Short:        short,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mac, err := base64.StdEncoding.DecodeString(strings.TrimSpace(hmacB64))
			if err != nil || len(mac) == 0 {
				return fmt.Errorf("--hmac %q: not the base64 HMAC of a token", hmacB64)
			}
			return adminClientRun(cmd, cf, func(ctx context.Context, _ *kadm.Client, cl *kgo.Client, format string) error {
				code, exp, err := send(ctx, cl, mac, period)
				if err != nil {
					return err
				}
				if err := tokenError(short, code); err != nil {
					return err
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), map[string]any{"expiry_timestamp": exp})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "The token's expiry timestamp is %s (%s).\n", strconv.FormatInt(exp, 10), time.UnixMilli(exp).UTC().Format(time.RFC3339))
				return err
			})
		},
	}
	cmd.Flags().StringVar(&hmacB64, "hmac", "", "the token's HMAC (base64)")
	cmd.Flags().Int64Var(&period, periodFlag, -1, periodUsage)
	_ = cmd.MarkFlagRequired("hmac")
	return cmd
}

func newTokenRenewCommand(cf *clientFlags) *cobra.Command {
	return tokenChange(cf, "renew --hmac HMAC [--renew-time-period MS]", "Renew a delegation token", "renew-time-period",
		"how long from now the token lives on, in ms (-1: delegation.token.expiry.time.ms)",
		func(ctx context.Context, cl *kgo.Client, mac []byte, period int64) (int16, int64, error) {
			req := kmsg.NewPtrRenewDelegationTokenRequest()
			req.HMAC, req.RenewTimeMillis = mac, period
			r, err := req.RequestWith(ctx, cl)
			if err != nil {
				return 0, 0, fmt.Errorf("renewing the delegation token: %w", err)
			}
			return r.ErrorCode, r.ExpiryTimestamp, nil
		})
}

func newTokenExpireCommand(cf *clientFlags) *cobra.Command {
	return tokenChange(cf, "expire --hmac HMAC [--expiry-time-period MS]", "Expire a delegation token", "expiry-time-period",
		"how long from now until the token expires, in ms (-1: at once, removing it)",
		func(ctx context.Context, cl *kgo.Client, mac []byte, period int64) (int16, int64, error) {
			req := kmsg.NewPtrExpireDelegationTokenRequest()
			req.HMAC, req.ExpiryPeriodMillis = mac, period
			r, err := req.RequestWith(ctx, cl)
			if err != nil {
				return 0, 0, fmt.Errorf("expiring the delegation token: %w", err)
			}
			return r.ErrorCode, r.ExpiryTimestamp, nil
		})
}

func newTokenDescribeCommand(cf *clientFlags) *cobra.Command {
	var owners []string
	cmd := &cobra.Command{
		Use:          "describe [--owner-principal User:NAME ...]",
		Short:        "Describe the delegation tokens the caller may see",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := kmsg.NewPtrDescribeDelegationTokenRequest()
			for _, o := range owners {
				typ, name, err := principalFlag(o)
				if err != nil {
					return err
				}
				ow := kmsg.NewDescribeDelegationTokenRequestOwner()
				ow.PrincipalType, ow.PrincipalName = typ, name
				req.Owners = append(req.Owners, ow)
			}
			return adminClientRun(cmd, cf, func(ctx context.Context, _ *kadm.Client, cl *kgo.Client, format string) error {
				r, err := req.RequestWith(ctx, cl)
				if err != nil {
					return fmt.Errorf("describing delegation tokens: %w", err)
				}
				if err := tokenError("describing delegation tokens", r.ErrorCode); err != nil {
					return err
				}
				var rows []tokenRow
				for _, d := range r.TokenDetails {
					row := tokenRow{
						TokenID: d.TokenID, HMAC: base64.StdEncoding.EncodeToString(d.HMAC),
						Owner: d.PrincipalType + ":" + d.PrincipalName, Requester: d.TokenRequesterPrincipalType + ":" + d.TokenRequesterPrincipalName,
						Issued: d.IssueTimestamp, Expiry: d.ExpiryTimestamp, Max: d.MaxTimestamp, Renewers: []string{},
					}
					for _, rn := range d.Renewers {
						row.Renewers = append(row.Renewers, rn.PrincipalType+":"+rn.PrincipalName)
					}
					rows = append(rows, row)
				}
				return printTokens(cmd, format, rows)
			})
		},
	}
	cmd.Flags().StringArrayVar(&owners, "owner-principal", nil, "only tokens this principal owns or may renew (repeatable)")
	return cmd
}
