package security

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// unsecuredValidator is Kafka's OAuthBearerUnsecuredValidatorCallbackHandler, OAUTHBEARER's
// default on a broker: the token is an unsecured JWS (RFC 7515 appendix A.5: header
// {"alg":"none"}, claims, an empty signature), so anyone can write one. It is for tests and
// development, as in Kafka. Its options come from the listener's OAUTHBEARER JAAS line:
//
//	unsecuredValidatorPrincipalClaimName  the claim naming the principal (default sub)
//	unsecuredValidatorScopeClaimName      the claim holding the scope (default scope)
//	unsecuredValidatorRequiredScope       scope elements (space-separated) a token must hold
//	unsecuredValidatorAllowableClockSkewMs  milliseconds of skew allowed on exp and iat (0)
//
// The checks, in Kafka's order: the principal claim is a string; iat, when present, is not
// after now plus the skew; exp is present and now minus the skew is before it; exp is after
// iat; every required scope element is in the token's scope (else insufficient_scope).
type unsecuredValidator struct {
	principalClaim, scopeClaim string
	requiredScope              []string
	skew                       time.Duration
}

func newUnsecuredValidator(j JAAS, jaasKey string) (*unsecuredValidator, error) {
	opt := func(k, dflt string) string {
		if v := strings.TrimSpace(j.Options[k]); v != "" {
			return v
		}
		return dflt
	}
	v := &unsecuredValidator{
		principalClaim: opt("unsecuredValidatorPrincipalClaimName", "sub"),
		scopeClaim:     opt("unsecuredValidatorScopeClaimName", "scope"),
		requiredScope:  strings.Fields(opt("unsecuredValidatorRequiredScope", "")),
	}
	if s := opt("unsecuredValidatorAllowableClockSkewMs", "0"); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s: unsecuredValidatorAllowableClockSkewMs=%q is not a non-negative number of milliseconds", jaasKey, s)
		}
		v.skew = time.Duration(n) * time.Millisecond
	}
	return v, nil
}

func invalidToken(format string, args ...any) *oauthInvalid {
	return &oauthInvalid{status: "invalid_token", reason: fmt.Sprintf(format, args...)}
}

func (v *unsecuredValidator) validate(token string, now time.Time) (oauthToken, *oauthInvalid) {
	if strings.Contains(token, "..") {
		return oauthToken{}, invalidToken("Malformed compact serialization contains '..'")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return oauthToken{}, invalidToken("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
	}
	header, bad := jwsJSON(parts[0])
	if bad != nil {
		return oauthToken{}, bad
	}
	claims, bad := jwsJSON(parts[1])
	if bad != nil {
		return oauthToken{}, bad
	}
	if alg, _ := header["alg"].(string); alg != "none" {
		return oauthToken{}, invalidToken("Unsecured JWS must have 'none' for an algorithm")
	}
	if parts[2] != "" {
		return oauthToken{}, invalidToken("Unsecured JWS must not contain a digital signature")
	}
	scope, bad := scopeClaim(claims, v.scopeClaim)
	if bad != nil {
		return oauthToken{}, bad
	}
	exp, ok, bad := numericClaim(claims, "exp")
	if bad != nil {
		return oauthToken{}, bad
	}
	if !ok {
		return oauthToken{}, invalidToken("No expiration time in JWT")
	}
	principal, isString := claims[v.principalClaim].(string)
	if claims[v.principalClaim] != nil && !isString {
		return oauthToken{}, invalidToken("The '%s' claim was not of type String", v.principalClaim)
	}
	if strings.TrimSpace(principal) == "" {
		return oauthToken{}, invalidToken("No principal name in JWT claim: %s", v.principalClaim)
	}
	iat, hasIat, bad := numericClaim(claims, "iat")
	if bad != nil {
		return oauthToken{}, bad
	}
	nowMs := float64(now.UnixMilli())
	skewMs := float64(v.skew.Milliseconds())
	if hasIat && 1000*iat > nowMs+skewMs {
		return oauthToken{}, invalidToken("The Issued At value (%f seconds) was after the indicated time (%d ms) plus allowable clock skew (%d ms)", iat, now.UnixMilli(), v.skew.Milliseconds())
	}
	if nowMs-skewMs >= 1000*exp {
		return oauthToken{}, invalidToken("The indicated time (%d ms) minus allowable clock skew (%d ms) was on or after the Expiration Time value (%f seconds)", now.UnixMilli(), v.skew.Milliseconds(), exp)
	}
	if hasIat && exp <= iat {
		return oauthToken{}, invalidToken("The Expiration Time time (%f seconds) was not after the Issued At time (%f seconds)", exp, iat)
	}
	for _, want := range v.requiredScope {
		if !containsString(scope, want) {
			return oauthToken{}, &oauthInvalid{
				status: "insufficient_scope",
				scope:  "[" + strings.Join(v.requiredScope, ", ") + "]",
				reason: fmt.Sprintf("The provided scope (%v) was missing a required scope (%s).  All required scope elements: %v", scope, want, v.requiredScope),
			}
		}
	}
	return oauthToken{principal: principal, expires: time.UnixMilli(int64(math.Round(exp * 1000)))}, nil
}

// jwsJSON decodes one base64url part of a compact JWS into its JSON object.
func jwsJSON(part string) (map[string]any, *oauthInvalid) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(part, "="))
	if err != nil {
		return nil, invalidToken("malformed Base64 URL encoded value")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return nil, invalidToken("malformed JSON")
	}
	return m, nil
}

// numericClaim is a claim holding a (possibly fractional) number of seconds; ok is false when
// it is absent.
func numericClaim(claims map[string]any, name string) (float64, bool, *oauthInvalid) {
	raw, present := claims[name]
	if !present || raw == nil {
		return 0, false, nil
	}
	n, isNum := raw.(json.Number)
	if !isNum {
		return 0, false, invalidToken("The '%s' claim was not of type Number", name)
	}
	f, err := n.Float64()
	if err != nil {
		return 0, false, invalidToken("The '%s' claim was not of type Number", name)
	}
	return f, true, nil
}

// scopeClaim is a token's scope as Kafka reads it: a string claim is one scope element
// (trimmed, not split), a list claim its non-blank elements; absent, blank or empty: none.
func scopeClaim(claims map[string]any, name string) ([]string, *oauthInvalid) {
	switch s := claims[name].(type) {
	case nil:
		return nil, nil
	case string:
		if strings.TrimSpace(s) == "" {
			return nil, nil
		}
		return []string{strings.TrimSpace(s)}, nil
	case []any:
		var out []string
		for _, e := range s {
			str := fmt.Sprint(e)
			if x, ok := e.(string); ok {
				str = x
			}
			if t := strings.TrimSpace(str); t != "" && !containsString(out, t) {
				out = append(out, t)
			}
		}
		return out, nil
	}
	return nil, invalidToken("The '%s' claim was not of type List", name)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// unsecuredLogin makes the unsecured tokens of Kafka's OAuthBearerUnsecuredLoginCallbackHandler
// from a JAAS line's options, for the broker's own connections:
//
//	unsecuredLoginStringClaim_<name>="value"     a string claim (sub: the principal)
//	unsecuredLoginNumberClaim_<name>="1"         a number claim
//	unsecuredLoginListClaim_<name>=",a,b"        a list claim, its first character the separator
//	unsecuredLoginExtension_<name>="value"       a SASL extension
//	unsecuredLoginPrincipalClaimName             the principal claim (default sub)
//	unsecuredLoginLifetimeSeconds                the token's lifetime (default 3600)
//
// iat and exp are the login's own.
type unsecuredLogin struct {
	claims     map[string]any
	extensions map[string]string
	sub        string // the principal
	lifetime   time.Duration
}

func newUnsecuredLogin(j JAAS) (*unsecuredLogin, error) {
	l := &unsecuredLogin{claims: map[string]any{}, extensions: map[string]string{}, lifetime: time.Hour}
	principalClaim := "sub"
	for k, v := range j.Options {
		var name string
		var ok bool
		switch {
		case k == "unsecuredLoginPrincipalClaimName":
			if strings.TrimSpace(v) != "" {
				principalClaim = strings.TrimSpace(v)
			}
			continue
		case k == "unsecuredLoginLifetimeSeconds":
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("unsecuredLoginLifetimeSeconds=%q is not a positive number of seconds", v)
			}
			l.lifetime = time.Duration(n) * time.Second
			continue
		case strings.HasPrefix(k, "unsecuredLoginExtension_"):
			name = strings.TrimPrefix(k, "unsecuredLoginExtension_")
			if name == "auth" || !oauthKeyRE.MatchString(name) || !oauthValueRE.MatchString(v) {
				return nil, fmt.Errorf("%s: not a valid SASL extension", k)
			}
			l.extensions[name] = v
			continue
		}
		if name, ok = strings.CutPrefix(k, "unsecuredLoginStringClaim_"); ok {
			l.claims[name] = v
		} else if name, ok = strings.CutPrefix(k, "unsecuredLoginNumberClaim_"); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return nil, fmt.Errorf("%s=%q is not a number", k, v)
			}
			l.claims[name] = n
		} else if name, ok = strings.CutPrefix(k, "unsecuredLoginListClaim_"); ok {
			if v == "" {
				l.claims[name] = []string{}
			} else {
				l.claims[name] = strings.Split(v[1:], v[:1])
			}
		} else {
			continue
		}
		if name == "iat" || name == "exp" {
			return nil, fmt.Errorf("%s: the %s claim is the login's own", k, name)
		}
	}
	p, _ := l.claims[principalClaim].(string)
	if strings.TrimSpace(p) == "" {
		return nil, fmt.Errorf("OAUTHBEARER for the broker's own connections needs the principal: unsecuredLoginStringClaim_%s=\"<name>\"", principalClaim)
	}
	l.sub = p
	return l, nil
}

func (l *unsecuredLogin) principal() string { return l.sub }

// clientMessage carries a token made at now.
func (l *unsecuredLogin) clientMessage(now time.Time) ([]byte, error) {
	claims := map[string]any{"iat": float64(now.UnixMilli()) / 1000, "exp": float64(now.Add(l.lifetime).UnixMilli()) / 1000}
	for k, v := range l.claims {
		claims[k] = v
	}
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return bearerMessage(enc(map[string]string{"alg": "none"})+"."+enc(claims)+".", l.extensions), nil
}

// bearerMessage is RFC 7628's client message carrying token and the SASL extensions.
func bearerMessage(token string, extensions map[string]string) []byte {
	var b strings.Builder
	b.WriteString("n,,\x01auth=Bearer " + token + "\x01")
	keys := make([]string, 0, len(extensions))
	for k := range extensions {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(k + "=" + extensions[k] + "\x01")
	}
	b.WriteString("\x01")
	return []byte(b.String())
}
