package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// SetAfterFenceHook makes s call fn inside every fenced interval write,
// right after the fence check passed and before anything is written, so a
// test can act while the write's transaction holds its fence. Not safe to
// call while s is in use.
func SetAfterFenceHook(s *Store, fn func()) { s.afterFence = fn }

// SetAfterSourceReadHook makes s call fn inside every sources transition,
// right after it read the source's row and before it decides or writes, so
// a test can act while the transition holds what it read. Not safe to call
// while s is in use.
func SetAfterSourceReadHook(s *Store, fn func()) { s.afterSourceRead = fn }

// MigrationsDigest is a hash of every embedded migration (names and
// contents), hex: a test template database migrated by this binary is
// named after it, so a changed migration gets a new template.
func MigrationsDigest() string {
	h := sha256.New()
	entries, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		panic(err) // fixed at build time
	}
	for _, e := range entries {
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
