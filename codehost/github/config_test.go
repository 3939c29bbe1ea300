package github

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNewValidatesTheCredentials(t *testing.T) {
	secret := "ghp_supersecretvalue123"
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"nothing", Config{}, "no credentials"},
		{"both", Config{AppID: 1, PrivateKey: []byte("x"), Token: secret}, "not both"},
		{"app without key", Config{AppID: 1}, "private key"},
		{"key without app", Config{PrivateKey: []byte("x")}, "app id"},
		{"bad pem", Config{AppID: 1, PrivateKey: []byte(secret)}, "private key is not PEM"},
		{"pem of no key", Config{AppID: 1, PrivateKey: []byte("-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0\n-----END RSA PRIVATE KEY-----\n")}, "private key"},
		{"bad url", Config{Token: secret, APIURL: "ftp://x"}, "API URL"},
		{"negative", Config{Token: secret, MaxAttempts: -1}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), secret, "a secret never appears in an error")
			require.NotContains(t, err.Error(), "c2VjcmV0")
		})
	}
	c, err := New(Config{Token: secret})
	require.NoError(t, err)
	require.Equal(t, DefaultAPIURL, c.base.String())
	c, err = New(Config{Token: secret, APIURL: "https://ghe.example.com/api/v3"})
	require.NoError(t, err)
	require.Equal(t, "https://ghe.example.com/api/v3/", c.base.String(), "GitHub Enterprise Server's base, as given")
}

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	var got []time.Duration
	for a := 1; a <= 8; a++ {
		got = append(got, backoff(500*time.Millisecond, 20*time.Second, a))
	}
	require.Equal(t, []time.Duration{
		500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second,
		8 * time.Second, 16 * time.Second, 20 * time.Second, 20 * time.Second,
	}, got)
}

func TestRouteOfNamesTheTemplate(t *testing.T) {
	for _, tc := range []struct{ method, path, base, want string }{
		{"PATCH", "/repos/acme/x/check-runs/17", "/", RouteUpdateCheckRun},
		{"GET", "/repos/acme/x/issues/3/comments", "/", RouteIssueComments},
		{"PATCH", "/repos/acme/x/issues/comments/9", "/", RouteEditIssueComment},
		{"POST", "/repos/acme/x/issues/comments/9/reactions", "/", RouteIssueCommentReactions},
		{"GET", "/api/v3/repos/acme/x/branches/feature%2Fa/protection", "/api/v3/", RouteBranchProtection},
		{"POST", "/api/v3/app/installations/5/access_tokens", "/api/v3/", RouteInstallationToken},
		{"GET", "/somewhere/else", "/", "GET (other)"},
	} {
		u, err := url.Parse("https://h" + tc.path)
		require.NoError(t, err)
		req := &http.Request{Method: tc.method, URL: u}
		req = req.WithContext(t.Context())
		require.Equal(t, tc.want, routeOf(req, tc.base), tc.path)
	}
}

func TestRateLimitTellsALimitFromARefusal(t *testing.T) {
	h := http.Header{}
	limited, _, _ := rateLimit(403, h, "Resource not accessible by integration")
	require.False(t, limited)
	limited, _, _ = rateLimit(403, h, "You have exceeded a secondary rate limit. Please wait a few minutes.")
	require.True(t, limited)
	limited, _, _ = rateLimit(429, h, "")
	require.True(t, limited)
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", "1700000000")
	limited, reset, ok := rateLimit(403, h, "API rate limit exceeded")
	require.True(t, limited)
	require.True(t, ok)
	require.Equal(t, time.Unix(1700000000, 0), reset)
	limited, _, _ = rateLimit(404, h, "")
	require.False(t, limited)
}
