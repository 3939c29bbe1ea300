package codehost

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// ErrSignature is wrapped by VerifySignature's refusals: the delivery is
// not proven to come from the host, and nothing of it may be acted on.
var ErrSignature = errors.New("codehost: webhook signature")

// SignatureHeader is the header GitHub signs deliveries in (HMAC-SHA256).
// The SHA-1 header X-Hub-Signature is never accepted.
const SignatureHeader = "X-Hub-Signature-256"

// VerifySignature checks a delivery's X-Hub-Signature-256 value
// ("sha256=" and the hex HMAC-SHA256 of body under secret) in constant
// time. An empty secret, a missing or malformed header, or a mismatch is
// an error wrapping ErrSignature: verification never passes open.
func VerifySignature(secret, body []byte, header string) error {
	if len(secret) == 0 {
		return fmt.Errorf("%w: no webhook secret is configured", ErrSignature)
	}
	if header == "" {
		return fmt.Errorf("%w: the %s header is missing", ErrSignature, SignatureHeader)
	}
	hexsum, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return fmt.Errorf("%w: the %s header does not start with sha256=", ErrSignature, SignatureHeader)
	}
	got, err := hex.DecodeString(hexsum)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: the %s header is not a hex SHA-256", ErrSignature, SignatureHeader)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return fmt.Errorf("%w: the signature does not match the body", ErrSignature)
	}
	return nil
}

// Sign returns the X-Hub-Signature-256 value for body under secret, as
// GitHub computes it (for the fake and the tests).
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Event is a webhook delivery, normalized. Only the fields of its Kind are
// set.
type Event struct {
	// Kind is the X-GitHub-Event header: pull_request, issue_comment,
	// push, check_run, installation, ping, ...
	Kind       string
	DeliveryID string // X-GitHub-Delivery
	Action     string // opened, synchronize, reopened, closed, created, edited, ...
	Repo       string // owner/name
	// InstallationID is the App installation the delivery is for (0 for
	// repository webhooks).
	InstallationID int64
	Sender         string // login of the user who caused it

	// Number is the pull request (pull_request; issue_comment on a PR).
	Number int
	// PR is the pull request as the payload carries it (pull_request).
	PR *PR
	// Comment is the comment (issue_comment); OnPR says the commented
	// issue is a pull request.
	Comment *Comment
	OnPR    bool

	// Ref and After are a push's ref (refs/heads/main) and new head;
	// After is also the head of a check run or suite asked to re-run.
	Ref   string
	After string
}
