package githubfake

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	jwt "github.com/golang-jwt/jwt/v4"
)

// credential is a token the fake handed out.
type credential struct {
	kind           credKind
	installationID int64     // credInstallation: whose token
	user           string    // credPersonal: who it acts as
	expires        time.Time // credInstallation: on the fake clock
	revoked        bool
}

type credKind int

const (
	credInstallation credKind = iota + 1
	credPersonal
)

// actor is who made a request.
type actor struct {
	kind           actorKind
	login          string // "<slug>[bot]" or a user's login
	userType       string // Bot or User
	appID          int64  // the App its check runs belong to
	appSlug        string
	installationID int64
	bucket         string // its rate-limit bucket
	limit          int    // its primary rate limit per hour
}

type actorKind int

const (
	actorNone actorKind = iota
	actorApp            // a valid App JWT
	actorInstallation
	actorPersonal
)

// Token lifetimes and JWT rules, from GitHub's docs.
const (
	// installationTokenTTL: "Installation access tokens expire one hour
	// from the time you create them" (docs: Authenticating as a GitHub App
	// installation).
	installationTokenTTL = time.Hour
	// jwtMaxLifetime: the JWT's exp "must be no more than 10 minutes into
	// the future" (docs: Generating a JSON Web Token for a GitHub App).
	jwtMaxLifetime = 10 * time.Minute
	// jwtSkew: the drift the fake tolerates on iat and exp. GitHub asks
	// for iat 60 seconds in the past "to protect against clock drift".
	jwtSkew = 60 * time.Second
	// archiveTTL: a private repository's archive link "expires after five
	// minutes" (docs: Download a repository archive).
	archiveTTL = 5 * time.Minute
)

// randomHex returns n random bytes as hex. (crypto/rand.Read never
// returns an error: it crashes the program if the system's source fails.)
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newToken mints a token string shaped like GitHub's: prefix + 36
// characters.
func newToken(prefix string) string { return prefix + randomHex(18) }

// PersonalToken returns a token acting as user, valid until Revoke: the
// GITHUB_TOKEN case of GitHub Actions (or a personal access token). Its
// check runs belong to GitHub Actions' App (slug "github-actions"), as a
// GITHUB_TOKEN's do; its comments and merges are user's.
func (f *Fake) PersonalToken(user string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	tok := newToken("ghp_")
	f.creds[tok] = &credential{kind: credPersonal, user: user}
	return tok
}

// Revoke makes a token (personal or installation) answer 401 from now on.
func (f *Fake) Revoke(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.creds[token]; c != nil {
		c.revoked = true
	}
}

// InstallationID is the id of the App's installation that covers repo
// (one installation per owner, as on GitHub); 0 when the repository is
// unknown.
func (f *Fake) InstallationID(repo string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.lookupRepo(repo)
	if r == nil {
		return 0
	}
	return f.installations[strings.ToLower(r.owner)]
}

// installationOwner returns the owner an installation id belongs to.
func (f *Fake) installationOwner(id int64) (string, bool) {
	for owner, iid := range f.installations {
		if iid == id {
			return owner, true
		}
	}
	return "", false
}

// authError is a 401 with GitHub's message.
type authError struct{ message string }

func (e *authError) Error() string { return e.message }

// verifyJWT checks an App JWT as GitHub does: RS256 signed by the App's
// key, iss the App's id, iat not in the future and exp in the future but
// at most 10 minutes away (each with 60 s of drift allowed). Times are
// checked against the wall clock, not the fake's: ghinstallation signs
// with time.Now (iat 30 s in the past, exp 2 minutes later).
func (f *Fake) verifyJWT(raw string) error {
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"RS256"}), jwt.WithoutClaimsValidation())
	claims := &jwt.RegisteredClaims{}
	_, err := parser.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return &f.key.PublicKey, nil })
	if err != nil {
		return &authError{"A JSON web token could not be decoded"}
	}
	if claims.Issuer != strconv.FormatInt(f.appID, 10) {
		return &authError{"'Issuer' claim ('iss') must be an Integer"}
	}
	now := time.Now()
	if claims.IssuedAt == nil || claims.IssuedAt.After(now.Add(jwtSkew)) {
		return &authError{"'Issued at' claim ('iat') must be an Integer representing a time in the past"}
	}
	if claims.ExpiresAt == nil || !claims.ExpiresAt.After(now.Add(-jwtSkew)) {
		return &authError{"'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"}
	}
	if claims.ExpiresAt.After(now.Add(jwtMaxLifetime + jwtSkew)) {
		return &authError{"'Expiration time' claim ('exp') is too far in the future"}
	}
	return nil
}

// bearer extracts the credential from an Authorization header: "token X"
// or "Bearer X" (GitHub accepts both for tokens; JWTs come as Bearer).
func bearer(header string) (string, bool) {
	scheme, value, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok {
		return "", false
	}
	switch strings.ToLower(scheme) {
	case "token", "bearer":
		value = strings.TrimSpace(value)
		return value, value != ""
	}
	return "", false
}

// authenticate resolves the Authorization header for a route. JWT routes
// take only a valid App JWT; token routes take only a live installation
// or personal token. Call with f.mu held.
func (f *Fake) authenticate(header string, wantJWT bool) (*actor, error) {
	raw, ok := bearer(header)
	if !ok {
		if wantJWT {
			return nil, &authError{"A JSON web token could not be decoded"}
		}
		return nil, &authError{"Requires authentication"}
	}
	if wantJWT {
		if err := f.verifyJWT(raw); err != nil {
			return nil, err
		}
		return &actor{
			kind: actorApp, login: f.appSlug + "[bot]", userType: "Bot",
			appID: f.appID, appSlug: f.appSlug, bucket: "app", limit: 5000,
		}, nil
	}
	c := f.creds[raw]
	if c == nil || c.revoked {
		return nil, &authError{"Bad credentials"}
	}
	switch c.kind {
	case credInstallation:
		if !f.clock.Now().Before(c.expires) {
			return nil, &authError{"Bad credentials"}
		}
		return &actor{
			kind: actorInstallation, login: f.appSlug + "[bot]", userType: "Bot",
			appID: f.appID, appSlug: f.appSlug, installationID: c.installationID,
			bucket: "installation:" + strconv.FormatInt(c.installationID, 10), limit: 5000,
		}, nil
	case credPersonal:
		userType := "User"
		if strings.HasSuffix(c.user, "[bot]") {
			userType = "Bot"
		}
		return &actor{
			kind: actorPersonal, login: c.user, userType: userType,
			appID: actionsAppID, appSlug: actionsAppSlug,
			bucket: "token:" + raw, limit: 5000,
		}, nil
	}
	return nil, &authError{"Bad credentials"}
}

// canAccess reports whether an actor may see a repository: an
// installation token only its owner's repositories (others are 404, as
// GitHub hides what a token cannot see); a personal token every one.
func (f *Fake) canAccess(a *actor, r *repo) bool {
	if a.kind != actorInstallation {
		return true
	}
	return f.installations[strings.ToLower(r.owner)] == a.installationID
}

// mintInstallationToken creates an installation token expiring one hour
// from now on the fake clock. Call with f.mu held.
func (f *Fake) mintInstallationToken(installationID int64) (string, time.Time, error) {
	if _, ok := f.installationOwner(installationID); !ok {
		return "", time.Time{}, errors.New("no such installation")
	}
	tok := newToken("ghs_")
	expires := f.clock.Now().Add(installationTokenTTL).UTC().Truncate(time.Second)
	f.creds[tok] = &credential{kind: credInstallation, installationID: installationID, expires: expires}
	return tok, expires, nil
}

// rateWindow is one credential's primary rate-limit window.
type rateWindow struct {
	reset time.Time
	used  int
}

// SetRateLimit sets every credential's primary rate limit per hour (0
// restores GitHub's 5000). A request past it answers 403 with
// X-RateLimit-Remaining 0, as GitHub does.
func (f *Fake) SetRateLimit(limit int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rateLimit = limit
}

// countRate counts a request against its bucket and returns GitHub's
// rate-limit headers and whether the request is over the limit. Call with
// f.mu held.
func (f *Fake) countRate(bucket string, limit int) (headers map[string]string, over bool) {
	if f.rateLimit > 0 {
		limit = f.rateLimit
	}
	now := f.clock.Now()
	w := f.rate[bucket]
	if w == nil || !now.Before(w.reset) {
		w = &rateWindow{reset: now.Add(time.Hour).Truncate(time.Second)}
		f.rate[bucket] = w
	}
	over = w.used >= limit
	if !over {
		w.used++
	}
	remaining := limit - w.used
	if remaining < 0 {
		remaining = 0
	}
	return map[string]string{
		"X-RateLimit-Limit":     strconv.Itoa(limit),
		"X-RateLimit-Remaining": strconv.Itoa(remaining),
		"X-RateLimit-Used":      strconv.Itoa(w.used),
		"X-RateLimit-Reset":     strconv.FormatInt(w.reset.Unix(), 10),
		"X-RateLimit-Resource":  "core",
	}, over
}

// rateLimitMessage is GitHub's body for an exhausted primary limit.
func rateLimitMessage(a *actor) string {
	if a != nil && a.kind == actorInstallation {
		return fmt.Sprintf("API rate limit exceeded for installation ID %d.", a.installationID)
	}
	return "API rate limit exceeded for user."
}
