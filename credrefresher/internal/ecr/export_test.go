package ecr

import "time"

// NewTokenForTest builds a Token with a password.
func NewTokenForTest(user, password string, expires time.Time) Token {
	return Token{Username: user, password: password, ExpiresAt: expires}
}
