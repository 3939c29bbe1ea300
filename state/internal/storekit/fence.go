package storekit

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/state"
)

// ValidateFence rejects a malformed fence. A fence carries a lease key and
// token (with now, to compare the lease's expiry with), an environment
// and a positive generation, a source and a positive source generation, or
// several of these; each form it carries must be complete. A malformed fence is a caller's bug and fails closed: every
// store refuses the write rather than performing it unfenced.
func ValidateFence(f state.Fence, now time.Time) error {
	leaseForm := f.LeaseKey != "" && f.LeaseToken != ""
	anyLease := f.LeaseKey != "" || f.LeaseToken != ""
	envForm := f.Environment != "" && f.Generation > 0
	anyEnv := f.Environment != "" || f.Generation != 0
	srcForm := f.Source != "" && f.SourceGeneration > 0
	anySrc := f.Source != "" || f.SourceGeneration != 0
	switch {
	case anyLease && !leaseForm, anyEnv && !envForm, anySrc && !srcForm, !anyLease && !anyEnv && !anySrc:
		return fmt.Errorf("malformed fence %+v: set LeaseKey and LeaseToken, Environment and a positive Generation, or Source and a positive SourceGeneration (or several)", f)
	case leaseForm && now.IsZero():
		return fmt.Errorf("lease fence on %q: %w", f.LeaseKey, state.ErrNoNow)
	}
	return nil
}

// NewLeaseToken returns 128 random bits as hex: unguessable, so a token is
// never reused and a stale holder can never match a new lease.
func NewLeaseToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a lease token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
