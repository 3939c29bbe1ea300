package githubfake_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	jwt "github.com/golang-jwt/jwt/v4"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost/githubfake"
)

// installationTransport is ghinstallation's transport for the fake's App
// and testRepo's installation, signing with key.
func installationTransport(t *testing.T, f *githubfake.Fake, key []byte) *ghinstallation.Transport {
	t.Helper()
	tr, err := ghinstallation.New(http.DefaultTransport, f.AppID(), f.InstallationID(testRepo), key)
	require.NoError(t, err)
	tr.BaseURL = strings.TrimSuffix(f.URL(), "/")
	return tr
}

// Scenario: ghinstallation signs a JWT with the App's key and trades it
// for an installation token; the token works until an hour passes on the
// fake clock, then it is "Bad credentials".
func TestInstallationTokenFromJWTExpiresOnTheFakeClock(t *testing.T) {
	f, clock, _ := setup(t, githubfake.Options{})
	tr := installationTransport(t, f, f.AppPrivateKeyPEM())
	tok, err := tr.Token(context.Background())
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(tok, "ghs_"), tok)
	expires, _, err := tr.Expiry()
	require.NoError(t, err)
	require.Equal(t, start.Add(time.Hour), expires.UTC())

	a := &api{t: t, f: f, token: tok}
	resp, body := a.doAuth("GET", "repos/"+testRepo+"/pulls", nil, "Bearer "+tok)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	reqs := f.Requests(githubfake.RouteListPulls)
	require.Equal(t, f.AppSlug()+"[bot]", reqs[len(reqs)-1].Actor)

	// Check runs made with the installation token belong to the App.
	n := openPR(f, map[string]string{"a.sql": "select 1"})
	status, run := a.createRun(object{"name": "gapless", "head_sha": f.PR(testRepo, n).HeadSHA})
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, f.AppSlug(), run["app"].(object)["slug"])
	require.EqualValues(t, f.AppID(), run["app"].(object)["id"])

	clock.Advance(time.Hour - time.Second)
	resp, _ = a.do("GET", "repos/"+testRepo+"/pulls", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	clock.Advance(time.Second)
	resp, body = a.do("GET", "repos/"+testRepo+"/pulls", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "Bad credentials", decode[object](t, body)["message"])
	require.NotEmpty(t, decode[object](t, body)["documentation_url"])

	// The App's JWT reads the App and the repository's installation.
	apps, err := ghinstallation.NewAppsTransport(http.DefaultTransport, f.AppID(), f.AppPrivateKeyPEM())
	require.NoError(t, err)
	client := &http.Client{Transport: apps}
	for path, check := range map[string]func(object){
		"app":                                 func(o object) { require.Equal(t, f.AppSlug(), o["slug"]) },
		"repos/" + testRepo + "/installation": func(o object) { require.EqualValues(t, f.InstallationID(testRepo), o["id"]) },
	} {
		resp, err := client.Get(f.URL() + path)
		require.NoError(t, err)
		var body []byte
		body, err = readAll(resp)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
		check(decode[object](t, body))
	}
}

// Scenario: a JWT signed by another key, or with claims GitHub refuses,
// gets 401; so do a missing token, an unknown one and a revoked one.
func TestBadCredentialsAre401(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	otherPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})
	_, err = installationTransport(t, f, otherPEM).Token(context.Background())
	var herr *ghinstallation.HTTPError
	require.True(t, errors.As(err, &herr), "%v", err)
	require.Equal(t, http.StatusUnauthorized, herr.Response.StatusCode)

	key, err := jwt.ParseRSAPrivateKeyFromPEM(f.AppPrivateKeyPEM())
	require.NoError(t, err)
	now := time.Now()
	sign := func(iss string, iat, exp time.Time) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
			Issuer: iss, IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(exp),
		}).SignedString(key)
		require.NoError(t, err)
		return s
	}
	app := strconv.FormatInt(f.AppID(), 10)
	for name, tc := range map[string]struct {
		jwt  string
		want int
	}{
		"valid, iat 60s in the past": {sign(app, now.Add(-60*time.Second), now.Add(9*time.Minute)), http.StatusCreated},
		"exp 20 minutes ahead":       {sign(app, now, now.Add(20*time.Minute)), http.StatusUnauthorized},
		"expired":                    {sign(app, now.Add(-10*time.Minute), now.Add(-5*time.Minute)), http.StatusUnauthorized},
		"iat in the future":          {sign(app, now.Add(5*time.Minute), now.Add(8*time.Minute)), http.StatusUnauthorized},
		"another app":                {sign("1", now, now.Add(time.Minute)), http.StatusUnauthorized},
		"not a JWT":                  {"not-a-jwt", http.StatusUnauthorized},
	} {
		resp, body := a.doAuth("POST", fmt.Sprintf("app/installations/%d/access_tokens", f.InstallationID(testRepo)), nil, "Bearer "+tc.jwt)
		require.Equal(t, tc.want, resp.StatusCode, "%s: %s", name, body)
		if tc.want == http.StatusCreated {
			got := decode[object](t, body)
			require.NotEmpty(t, got["token"])
			require.Equal(t, start.Add(time.Hour).Format(time.RFC3339), got["expires_at"])
		}
	}
	// An installation token is no JWT, and a JWT is no token.
	resp, _ := a.do("GET", "app", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = a.doAuth("GET", "repos/"+testRepo+"/pulls", nil, "Bearer "+sign(app, now, now.Add(time.Minute)))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	for name, auth := range map[string]string{"none": "", "unknown": "token ghs_nope", "malformed": "Basic abc"} {
		resp, body := a.doAuth("GET", "repos/"+testRepo+"/pulls", nil, auth)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, name)
		require.NotEmpty(t, decode[object](t, body)["message"])
	}
	f.Revoke(a.token)
	resp, body := a.do("GET", "repos/"+testRepo+"/pulls", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "Bad credentials", decode[object](t, body)["message"])
}

// Scenario: an installation token sees only its owner's repositories;
// another owner's answer 404, as GitHub hides what a token cannot see.
func TestInstallationTokenIsScopedToItsOwner(t *testing.T) {
	f, _, _ := setup(t, githubfake.Options{})
	f.CreateRepo("other/repo", "main")
	tok, err := installationTransport(t, f, f.AppPrivateKeyPEM()).Token(context.Background())
	require.NoError(t, err)
	a := &api{t: t, f: f, token: tok}
	resp, _ := a.do("GET", "repos/other/repo/pulls", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = a.do("GET", "repos/"+testRepo+"/pulls", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEqual(t, f.InstallationID(testRepo), f.InstallationID("other/repo"))
	require.Zero(t, f.InstallationID("no/such"))
}

// Every response carries GitHub's rate-limit headers and a request id;
// an unknown route, or a known path with another method, is 404 "Not
// Found"; the rate limit counts down and then answers 403.
func TestRateLimitHeadersAndNotFound(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "repos/" + testRepo, http.StatusOK},
		{"GET", "repos/" + testRepo + "/nothing-here", http.StatusNotFound},
		{"DELETE", "repos/" + testRepo + "/pulls", http.StatusNotFound},
		{"GET", "repos/no/such/pulls", http.StatusNotFound},
	} {
		resp, body := a.do(tc.method, tc.path, nil)
		require.Equal(t, tc.want, resp.StatusCode, "%s %s", tc.method, tc.path)
		for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Used", "X-RateLimit-Reset", "X-RateLimit-Resource", "X-GitHub-Request-Id"} {
			require.NotEmpty(t, resp.Header.Get(h), "%s on %s %s", h, tc.method, tc.path)
		}
		if tc.want == http.StatusNotFound {
			require.Equal(t, "Not Found", decode[object](t, body)["message"])
		}
	}
	resp, _ := a.do("GET", "repos/"+testRepo, nil)
	require.Equal(t, "5000", resp.Header.Get("X-RateLimit-Limit"))
	used, err := strconv.Atoi(resp.Header.Get("X-RateLimit-Used"))
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(5000-used), resp.Header.Get("X-RateLimit-Remaining"))
	require.Equal(t, strconv.FormatInt(start.Add(time.Hour).Unix(), 10), resp.Header.Get("X-RateLimit-Reset"))

	f.SetRateLimit(used + 1)
	resp, _ = a.do("GET", "repos/"+testRepo, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "0", resp.Header.Get("X-RateLimit-Remaining"))
	resp, body := a.do("GET", "repos/"+testRepo, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "0", resp.Header.Get("X-RateLimit-Remaining"))
	require.Contains(t, decode[object](t, body)["message"], "API rate limit exceeded")
}

func readAll(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
