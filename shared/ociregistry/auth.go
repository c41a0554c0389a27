package ociregistry

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// maxTokenBody bounds a token endpoint's answer.
const maxTokenBody = 1 << 20

// authorize answers a 401's WWW-Authenticate challenge: the Authorization header to send again,
// or "" when there is nothing more to try (no credentials for basic, an unknown scheme).
func (c *Client) authorize(ctx context.Context, op, ref, scope, challenge string) (string, error) {
	scheme, params := parseChallenge(challenge)
	switch strings.ToLower(scheme) {
	case "basic":
		if c.opts.Credentials.anonymous() {
			return "", nil
		}
		return "Basic " + basic(c.opts.Credentials), nil
	case "bearer":
		realm := params["realm"]
		if realm == "" {
			return "", &Error{Op: op, Ref: ref, Kind: ErrUnauthorized, Detail: "the registry's Bearer challenge names no realm"}
		}
		tok, err := c.token(ctx, op, ref, realm, params["service"], cmp.Or(params["scope"], scope))
		if err != nil {
			return "", err
		}
		return "Bearer " + tok, nil
	}
	return "", nil
}

func basic(cr Credentials) string {
	return base64.StdEncoding.EncodeToString([]byte(cr.Username + ":" + cr.Password))
}

// token asks the realm for a bearer token (the distribution token flow: GET with service and
// scope, basic auth with the credentials when there are any, anonymous otherwise).
func (c *Client) token(ctx context.Context, op, ref, realm, service, scope string) (string, error) {
	u, err := url.Parse(realm)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", &Error{Op: op, Ref: ref, Kind: ErrUnauthorized, Detail: fmt.Sprintf("the registry's token realm %q is not an http(s) URL", realm)}
	}
	q := u.Query()
	if service != "" {
		q.Set("service", service)
	}
	for _, s := range strings.Fields(scope) {
		q.Add("scope", s)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", &Error{Op: op, Ref: ref, Err: err}
	}
	if !c.opts.Credentials.anonymous() {
		req.Header.Set("Authorization", "Basic "+basic(c.opts.Credentials))
	}
	if c.opts.UserAgent != "" {
		req.Header.Set("User-Agent", c.opts.UserAgent)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", &Error{Op: op + " (token)", Ref: ref, Err: err}
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		e := statusError(op+" (token)", ref, resp)
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			e.Detail = "the token endpoint refused the credentials"
		}
		return "", e
	}
	var body struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, maxTokenBody))
	if err := dec.Decode(&body); err != nil {
		return "", &Error{Op: op + " (token)", Ref: ref, Kind: ErrUnauthorized, Detail: "the token endpoint's answer is not a token document"}
	}
	tok := cmp.Or(body.Token, body.AccessToken)
	if tok == "" {
		return "", &Error{Op: op + " (token)", Ref: ref, Kind: ErrUnauthorized, Detail: "the token endpoint gave no token"}
	}
	return tok, nil
}

// parseChallenge reads `Scheme k="v", k2="v2"` (RFC 7235; quoted values may hold commas).
func parseChallenge(h string) (scheme string, params map[string]string) {
	h = strings.TrimSpace(h)
	scheme, rest, _ := strings.Cut(h, " ")
	params = map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; {
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			break
		}
		key := strings.ToLower(strings.TrimSpace(rest[:eq]))
		rest = strings.TrimSpace(rest[eq+1:])
		var val string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(rest); i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
					b.WriteByte(rest[i])
					continue
				}
				if rest[i] == '"' {
					break
				}
				b.WriteByte(rest[i])
			}
			val = b.String()
			rest = rest[min(i+1, len(rest)):]
		} else {
			end := strings.IndexByte(rest, ',')
			if end < 0 {
				end = len(rest)
			}
			val = strings.TrimSpace(rest[:end])
			rest = rest[end:]
		}
		params[key] = val
		rest = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ","))
	}
	return scheme, params
}
